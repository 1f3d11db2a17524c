"""Anthropic Messages bodies as the API and its clients really send them, beyond the fixtures: beta
parameters that alone tell the format, stop reasons newer than a fixed list, and what a response's own
fields become when its turn is written into a request."""

from __future__ import annotations

from formats.accept_anthropic import check_request
from pipeline import formats
from pipeline.formats import anthropic
from pipeline.ingest.exchange import parse_exchange
from pipeline.ledger import Ledger

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}


def _round_trip(body: dict, shape: str) -> tuple[dict, Ledger]:
    ledger = Ledger("anthropic")
    return anthropic.serialize(anthropic.parse(body, shape=shape), shape=shape, ledger=ledger), ledger


def test_structured_output_parameters_alone_tell_an_anthropic_request():
    # The beta `output_format` (before `output_config.format`) and `inference_geo` are Anthropic's alone:
    # such a body is Anthropic's even with nothing else of its own, and round trips with no ledger entry.
    for extra in ({"output_format": {"type": "json_schema", "schema": SCHEMA}}, {"inference_geo": "us"}):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 256, **extra,
                "messages": [{"role": "user", "content": "Largest city of Portugal?"}]}
        found = formats.detect(body)
        assert (found.format, found.shape, found.certain) == ("anthropic", "request", True)
        out, ledger = _round_trip(body, "request")
        assert out == body and ledger.entries == []


def test_any_anthropic_stop_reason_comes_back_as_it_was():
    # A response that stopped for a reason this codec has no name for (a newer API) keeps it.
    body = {"id": "msg_01Stop", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "Paused."}], "stop_reason": "some_future_reason",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 2}}
    out, ledger = _round_trip(body, "response")
    assert out == body and ledger.entries == []


def test_a_responses_own_fields_stay_out_of_a_request_message():
    # A logged exchange: its response turn, written into the next request, must not carry the response's
    # stop_sequence, container or stop details (the API refuses unknown message keys); those with a value
    # are ledgered. The response alone still round trips with all of them.
    response = {"id": "msg_01Ex", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Looking."},
                            {"type": "tool_use", "id": "toolu_01Ex", "name": "get_city", "input": {"q": "pt"}}],
                "stop_reason": "tool_use", "stop_sequence": None,
                "container": {"id": "container_01Ex", "expires_at": "2025-11-01T00:00:00Z"},
                "usage": {"input_tokens": 40, "output_tokens": 12}}
    request = {"model": "claude-sonnet-4-5", "max_tokens": 256,
               "tools": [{"name": "get_city", "input_schema": SCHEMA}],
               "messages": [{"role": "user", "content": "Largest city of Portugal?"}]}
    conv = parse_exchange({"request": request, "response": response})
    body, ledger = formats.serialize(conv, "anthropic")
    assert body["messages"][1] == {"role": "assistant", "content": response["content"]}
    assert [(e.kind, e.path, e.reason) for e in ledger] == [
        ("dropped", "$.messages[1]", "response field 'container' has no place in a request's message")]
    body["messages"].append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01Ex", "content": "Lisbon"}]})
    assert check_request(body) == []
    _, foreign = formats.serialize(conv, "openai-chat")  # named as what they are, without the marker
    assert {e.reason for e in foreign if e.path == "$.messages[1]"} >= {
        "anthropic response field 'container' has no equivalent in openai-chat",
        "anthropic response field 'stop_sequence' has no equivalent in openai-chat"}
    out, ledger = _round_trip(response, "response")
    assert out == response and ledger.entries == []


def test_anthropic_defined_client_tools_are_function_tools():
    # bash, the text editor, computer use and memory are run by the client: the model calls them with
    # tool_use, the client answers with tool_result. They are function tools (their schema built into the
    # API), so other formats and templates get a definition for the calls; web search runs on Anthropic's
    # side and stays hosted.
    tools = [{"type": "bash_20250124", "name": "bash"},
             {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 8000},
             {"type": "computer_20250124", "name": "computer", "display_width_px": 1280, "display_height_px": 800},
             {"type": "memory_20250818", "name": "memory"},
             {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 512, "tools": tools, "messages": [
        {"role": "user", "content": "Count the lines of notes.txt."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01Bash", "name": "bash", "input": {"command": "wc -l notes.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01Bash", "content": "12 notes.txt"}]}]}
    conv = anthropic.parse(body)
    assert [(t.name, t.kind) for t in conv.tools] == [
        ("bash", "function"), ("str_replace_based_edit_tool", "function"), ("computer", "function"),
        ("memory", "function"), ("web_search", "hosted")]
    out, ledger = _round_trip(body, "request")
    assert out == body and ledger.entries == [] and check_request(out) == []
    chat, entries = formats.serialize(conv, "openai-chat")
    assert [t["function"] for t in chat["tools"]] == [
        {"name": "bash"}, {"name": "str_replace_based_edit_tool"}, {"name": "computer"}, {"name": "memory"}]
    reasons = {(e.path, e.reason) for e in entries}
    assert ("$.tools[2]", "anthropic field 'display_width_px' has no equivalent in openai-chat") in reasons
    assert ("$.tools[0]", "anthropic field 'type' has no equivalent in openai-chat") in reasons
    assert any(e.path == "$.tools[4]" and "hosted tool 'web_search'" in e.reason for e in entries)
