"""The workloads of the render and memory benches: conversations made from the tau-bench airline
trajectories of the corpus (SFTPREP_CORPUS, default ../shared/corpus), written as OpenAI Chat request
bodies, one JSONL line each. See render_bench.py for what each workload repeats."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("SFTPREP_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()
TAU = CORPUS / "tau_bench_gpt4o_airline" / "gpt-4o-airline.json"

# --- the workloads ----------------------------------------------------------------------------------

# Tool definitions for the airline trajectories (the corpus logs the calls, not the tool list). Written
# for this bench from the argument shapes the calls use.
_FLIGHTS = {"type": "array", "description": "Flight segments, in travel order.",
            "items": {"type": "object", "properties": {
                "flight_number": {"type": "string", "description": "Flight number, such as 'HAT001'."},
                "date": {"type": "string", "description": "Date of the flight, YYYY-MM-DD."}},
                "required": ["flight_number", "date"]}}
_PASSENGERS = {"type": "array", "description": "Every passenger of the reservation.",
               "items": {"type": "object", "properties": {
                   "first_name": {"type": "string", "description": "First name."},
                   "last_name": {"type": "string", "description": "Last name."},
                   "dob": {"type": "string", "description": "Date of birth, YYYY-MM-DD."}},
                   "required": ["first_name", "last_name", "dob"]}}
_STR = {"type": "string"}


def _tool(name: str, description: str, properties: dict, required: list[str] | None = None) -> dict:
    params = {"type": "object", "properties": properties,
              "required": list(properties) if required is None else required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


def _described(schema: dict, description: str) -> dict:
    return {**schema, "description": description}


AIRLINE_TOOLS = [
    _tool("book_reservation", "Book a reservation for a user once they have confirmed every detail.", {
        "user_id": _described(_STR, "The user's id, such as 'sara_doe_496'."),
        "origin": _described(_STR, "IATA code of the departure airport, such as 'SFO'."),
        "destination": _described(_STR, "IATA code of the arrival airport, such as 'JFK'."),
        "flight_type": {"type": "string", "enum": ["one_way", "round_trip"], "description": "Trip type."},
        "cabin": {"type": "string", "enum": ["basic_economy", "economy", "business"], "description": "Cabin class."},
        "flights": _FLIGHTS, "passengers": _PASSENGERS,
        "payment_methods": {"type": "array", "description": "How the booking is paid, method by method.",
                            "items": {"type": "object", "properties": {
                                "payment_id": _described(_STR, "A payment method id of the user."),
                                "amount": {"type": "number", "description": "Amount charged to it."}},
                                "required": ["payment_id", "amount"]}},
        "total_baggages": {"type": "integer", "description": "Checked bags in total."},
        "nonfree_baggages": {"type": "integer", "description": "Checked bags that are paid for."},
        "insurance": {"type": "string", "enum": ["yes", "no"], "description": "Whether travel insurance is bought."}}),
    _tool("calculate", "Evaluate an arithmetic expression (numbers, + - * / and parentheses).",
          {"expression": _described(_STR, "The expression, such as '2 * (3 + 4)'.")}),
    _tool("cancel_reservation", "Cancel a whole reservation.",
          {"reservation_id": _described(_STR, "The reservation id, such as 'ZFA04Y'.")}),
    _tool("get_reservation_details", "Get the details of a reservation.",
          {"reservation_id": _described(_STR, "The reservation id, such as 'ZFA04Y'.")}),
    _tool("get_user_details", "Get the profile of a user: name, address, payment methods, reservations.",
          {"user_id": _described(_STR, "The user's id, such as 'sara_doe_496'.")}),
    _tool("list_all_airports", "List every airport served, with its city.", {}),
    _tool("search_direct_flight", "Search direct flights between two airports on a date.", {
        "origin": _described(_STR, "IATA code of the departure airport."),
        "destination": _described(_STR, "IATA code of the arrival airport."),
        "date": _described(_STR, "Date of travel, YYYY-MM-DD.")}),
    _tool("search_onestop_flight", "Search flights with one stop between two airports on a date.", {
        "origin": _described(_STR, "IATA code of the departure airport."),
        "destination": _described(_STR, "IATA code of the arrival airport."),
        "date": _described(_STR, "Date of travel, YYYY-MM-DD.")}),
    _tool("send_certificate", "Send a travel certificate to a user as a goodwill gesture.", {
        "user_id": _described(_STR, "The user's id."),
        "amount": {"type": "number", "description": "Value of the certificate in dollars."}}),
    _tool("think", "Think about something without acting or fetching anything; the thought is logged.",
          {"thought": _described(_STR, "What to think about.")}),
    _tool("transfer_to_human_agents", "Hand the conversation to a human agent, when the request is outside "
          "what the policy lets the agent do.", {"summary": _described(_STR, "What the user needs, for the human agent.")}),
    _tool("update_reservation_baggages", "Change the checked bags of a reservation.", {
        "reservation_id": _described(_STR, "The reservation id."),
        "total_baggages": {"type": "integer", "description": "Checked bags in total."},
        "nonfree_baggages": {"type": "integer", "description": "Checked bags that are paid for."},
        "payment_id": _described(_STR, "Payment method for the extra bags.")}),
    _tool("update_reservation_flights", "Change the flights (and cabin) of a reservation.", {
        "reservation_id": _described(_STR, "The reservation id."),
        "cabin": {"type": "string", "enum": ["basic_economy", "economy", "business"], "description": "Cabin class."},
        "flights": _FLIGHTS, "payment_id": _described(_STR, "Payment method for any price difference.")}),
    _tool("update_reservation_passengers", "Change the passengers' details of a reservation.", {
        "reservation_id": _described(_STR, "The reservation id."), "passengers": _PASSENGERS}),
]


def load_trajectories() -> list[list[dict]]:
    if not TAU.is_file():
        sys.exit(f"render_bench: the corpus file {TAU} is missing (set SFTPREP_CORPUS)")
    return [item["traj"] for item in json.loads(TAU.read_text(encoding="utf-8"))]


def _tagged(message: dict, tag: str) -> dict:
    """A copy of the message whose text carries the conversation's tag."""
    return {**message, "content": f"{message['content']} [{tag}]"}


WORKLOADS = ("agent", "unique-turns", "distinct")


def make_conversation(trajectories: list[list[dict]], k: int, kind: str) -> dict:
    """Conversation k of a workload, as an OpenAI Chat request body.
    agent: trajectory k mod 120, its first user message tagged with k (the rest repeats, as it does in
    logs of repeated sessions or of every request of a session); unique-turns: every text of every user,
    tool and assistant message tagged; distinct: unique-turns with a distinct system prompt and tool order."""
    traj = trajectories[k % len(trajectories)]
    tag = f"session {k:06d}"
    if kind == "agent":
        first_user = next(i for i, m in enumerate(traj) if m["role"] == "user")
        messages = [_tagged(m, tag) if i == first_user else m for i, m in enumerate(traj)]
    else:
        messages = [_tagged(m, tag) if m["role"] != "system" and isinstance(m.get("content"), str) else m
                    for m in traj]
    tools = AIRLINE_TOOLS
    if kind == "distinct":
        rng = random.Random(k)
        messages[0] = {**messages[0], "content": f"Deployment {k:06d} (region {rng.randrange(1000)}).\n\n"
                                                 + messages[0]["content"]}
        tools = list(AIRLINE_TOOLS)
        rng.shuffle(tools)
    return {"model": "gpt-4o", "messages": messages, "tools": tools}


def write_workload(path: Path, kind: str, n: int) -> None:
    trajectories = load_trajectories()
    with open(path, "w", encoding="utf-8") as out:
        for k in range(n):
            out.write(json.dumps(make_conversation(trajectories, k, kind), ensure_ascii=False) + "\n")


def hf_inputs(body: dict) -> tuple[list[dict], list[dict]]:
    """What a transformers user passes apply_chat_template: the OpenAI messages with arguments parsed to
    objects (the Qwen templates `tojson` them: a string would be encoded twice) and the tools."""
    messages = []
    for message in body["messages"]:
        if message.get("tool_calls"):
            message = {**message, "tool_calls": [
                {**call, "function": {**call["function"], "arguments": json.loads(call["function"]["arguments"] or "{}")}}
                for call in message["tool_calls"]]}
        messages.append(message)
    return messages, body["tools"]
