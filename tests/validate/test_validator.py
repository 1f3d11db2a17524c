"""Validation rules: one hand-written fixture per code (a trigger and a near miss), the edge cases of
each rule, severities, provider paths on real codecs, the CLI, and properties over arbitrary input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from pipeline import formats
from pipeline.cli.main import main
from pipeline.conversation import (Conversation, Message, Meta, Reasoning, Text, Tool, ToolCall, ToolResult,
                                   from_json, to_json)
from pipeline.errors import ConfigError, SftprepError
from pipeline.ingest import parse_record
from pipeline.validate import RULES, ValidateConfig, has_errors, validate
from strategies import conversations, text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "validate"
FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def conv_of(data: dict) -> Conversation:
    return from_json(json.dumps(data))


def codes(conv: Conversation, config: ValidateConfig | None = None) -> list[tuple[str, str]]:
    return [(i.code, i.path) for i in validate(conv, config)]


# --- the registry -----------------------------------------------------------------------------------

def test_registry_codes_are_stable_snake_case_with_one_line_descriptions():
    for code, rule in RULES.items():
        assert re.fullmatch(r"[a-z][a-z_]*[a-z]", code), code
        assert rule.code == code
        assert rule.severity in ("error", "warning")
        assert rule.description and "\n" not in rule.description and len(rule.description) < 100
        if rule.provider is not None:
            assert rule.provider in formats.FORMATS and code.startswith(rule.provider.replace("-", "_") + "_")


def test_every_code_has_a_fixture():
    assert {load(p)["code"] for p in FIXTURE_FILES} == set(RULES)


# --- fixtures: the trigger fires at its path, the near miss does not ---------------------------------

@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_triggers_its_code_at_its_path(path):
    fixture = load(path)
    issues = validate(conv_of(fixture["trigger"]))
    hits = [i for i in issues if i.code == fixture["code"]]
    assert hits, f"{fixture['code']} did not fire; got {[(i.code, i.path) for i in issues]}"
    assert hits[0].path == fixture["path"]
    assert hits[0].severity == RULES[fixture["code"]].severity
    # One line that says what to do: "...: <what to do>".
    assert "\n" not in hits[0].message and ": " in hits[0].message


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_near_miss_is_clean(path):
    fixture = load(path)
    issues = validate(conv_of(fixture["near_miss"]))
    allowed = set(fixture.get("near_miss_allows", ()))
    assert [(i.code, i.path) for i in issues if i.code not in allowed] == []


# --- rule edge cases ----------------------------------------------------------------------------------

WEATHER = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"]})
Q = Message(role="user", blocks=(Text("Weather in Oslo?"),))
A = Message(role="assistant", blocks=(Text("4C."),))


def call(cid="c1", pid="call_1", args=None, **kw) -> ToolCall:
    return ToolCall(id=cid, name=kw.pop("name", "get_weather"), arguments={"city": "Oslo"} if args is None else args,
                    provider_id=pid, **kw)


def result(cid="c1", pid="call_1", **kw) -> ToolResult:
    return ToolResult(call_id=cid, provider_id=pid, name=kw.pop("name", "get_weather"), content=(Text("4C"),), **kw)


def conv(*messages: Message, tools=(WEATHER,), provider=None, **meta) -> Conversation:
    return Conversation(messages=messages, tools=tools, meta=Meta(provider=provider, **meta))


def asst(*blocks) -> Message:
    return Message(role="assistant", blocks=blocks)


def tool(*blocks) -> Message:
    return Message(role="tool", blocks=blocks)


def test_result_placed_before_its_call_is_an_orphan():
    c = conv(Q, tool(result()), asst(call()), tool(result(pid="call_1b")), A)
    assert ("orphan_result", "$.messages[1].blocks[0]") in codes(c)


def test_call_unanswered_while_user_turns_follow_is_an_error_not_at_end():
    c = conv(Q, asst(call()), Message(role="user", blocks=(Text("never mind"),)))
    assert codes(c) == [("unanswered_call", "$.messages[1].blocks[0]")]


def test_result_after_the_next_assistant_turn_does_not_answer_in_time():
    c = conv(Q, asst(call()), asst(Text("Still waiting.")), tool(result()), A)
    # Consecutive assistant messages are separate turns: Chat and the others refuse this history.
    assert codes(c) == [("unanswered_call", "$.messages[1].blocks[0]")]
    assert "another assistant message at $.messages[2]" in validate(c)[0].message
    c = conv(Q, asst(call()), Message(role="user", blocks=(Text("?"),)), asst(Text("Hm.")), tool(result()), A)
    assert ("unanswered_call", "$.messages[1].blocks[0]") in codes(c)


@pytest.mark.parametrize("args, raw, valid, what", [
    ([1, 2], "[1, 2]", True, "a JSON array"),
    ("Oslo", '"Oslo"', True, "a JSON string"),
    (3, "3", True, "a number"),
    (None, "null", True, "null"),
    (None, "", False, "an empty string"),
    (None, "{'city': 'Oslo'}", False, "invalid JSON"),
])
def test_arguments_not_object_names_what_they_are(args, raw, valid, what):
    from msgspec import UNSET
    c = conv(Q, asst(ToolCall(id="c1", name="get_weather", arguments=args if valid else UNSET, raw_arguments=raw,
                              arguments_valid=valid, provider_id="call_1")), tool(result()), A)
    issues = [i for i in validate(c) if i.code == "arguments_not_object"]
    assert len(issues) == 1 and what in issues[0].message


def test_custom_and_hosted_calls_are_not_held_to_function_rules():
    c = conv(Q, asst(call(name="apply_patch", args="*** Begin Patch", kind="custom"),
                     call(cid="c2", pid="ws_1", name="web_search", args={"q": "x"}, kind="hosted")),
             tool(result(name="apply_patch")), A)
    assert [code for code, _ in codes(c)] == ["unknown_tool"]  # the custom tool is not defined
    assert codes(replace(c, tools=(WEATHER, Tool(name="apply_patch", kind="custom")))) == []


def test_schema_follows_the_declared_draft_and_reports_broken_schemas_once():
    draft7 = Tool(name="get_weather", parameters={"$schema": "http://json-schema.org/draft-07/schema#",
                                                 "type": "object", "properties": {"days": {"type": "integer"}},
                                                 "dependencies": {"days": ["city"]}})
    c = conv(Q, asst(call(args={"days": 3})), tool(result()), A, tools=(draft7,))
    assert [code for code, _ in codes(c)] == ["arguments_schema"]  # draft-07 `dependencies` applied
    broken = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"pattern": "(["}}})
    c = conv(Q, asst(call(), call(cid="c2", pid="call_2")), tool(result(), result(cid="c2", pid="call_2")), A,
             tools=(broken,))
    assert codes(c) == [("invalid_tool_schema", "$.tools[0].parameters")]
    unresolvable = Tool(name="get_weather", parameters={"$ref": "https://example.invalid/schema.json"})
    c = conv(Q, asst(call()), tool(result()), A, tools=(unresolvable,))
    assert [code for code, _ in codes(c)] == ["invalid_tool_schema"]


def test_repeated_calls_get_their_own_answers():
    """Argument checks are cached by schema and arguments: equal calls get equal answers, and values
    JSON tells apart (1, true, "1") are not confused."""
    count = Tool(name="get_weather", parameters={"type": "object", "properties": {"days": {"type": "integer"}}})
    args = [{"days": 1}, {"days": True}, {"days": 1}, {"days": "1"}, {"days": True}, {"days": 2}]
    calls = [call(cid=f"c{i}", pid=f"call_{i}", args=a) for i, a in enumerate(args)]
    results = [result(cid=f"c{i}", pid=f"call_{i}") for i in range(len(args))]
    c = conv(Q, asst(*calls), tool(*results), A, tools=(count,))
    for _ in range(2):  # the second pass answers from the cache
        assert codes(c) == [("arguments_schema", f"$.messages[1].blocks[{i}].arguments.days") for i in (1, 3, 4)]


def test_reasoning_state_rules_per_origin():
    signed = Reasoning(text="think", signature="x" * 40, origin="anthropic")
    unsigned = Reasoning(text="think", origin="anthropic")
    redacted = Reasoning(redacted="ZGF0YQ==", origin="anthropic")
    responses_bare = Reasoning(summary=("Looked it up.",), origin="openai-responses")
    responses_stored = Reasoning(summary=("Looked it up.",), item_id="rs_1", origin="openai-responses")
    for block, expected in ((signed, []), (redacted, []), (unsigned, ["reasoning_without_state"]),
                            (Reasoning(text="t", signature="sig-first", origin="anthropic"),
                             ["reasoning_placeholder_state"]),
                            (responses_bare, ["reasoning_without_state"]), (responses_stored, [])):
        c = conv(Q, asst(block, call()), tool(result()), A)
        assert [code for code, _ in codes(c)] == expected, block


def test_anthropic_thinking_missing_on_the_last_tool_turn_when_enabled():
    c = conv(Q, asst(call()), Message(role="user", blocks=(result(),)), provider="anthropic")
    assert codes(c) == []
    enabled = replace(c, extras={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}}})
    assert codes(enabled) == [("anthropic_thinking_first", "$.messages[1].blocks[0]")]


def test_gemini_signatures_are_checked_in_the_current_turn_only():
    sig = "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="  # the documented dummy is accepted
    old = asst(call())  # an earlier turn's unsigned call: the API does not check it
    c = conv(Q, old, Message(role="user", blocks=(result(),)), asst(Text("4C. Anything else?")),
             Message(role="user", blocks=(Text("Bergen?"),)),
             asst(call(cid="c2", pid=None, args={"city": "Bergen"}, signature=sig)),
             Message(role="user", blocks=(result(cid="c2", pid=None),)), provider="gemini",
             model="gemini-3-flash-preview")  # a Gemini 3 requirement: see test_unseen_turns for 2.x
    assert codes(c) == []
    step2 = asst(call(cid="c3", pid=None, args={"city": "Tromso"}))
    c2 = replace(c, messages=c.messages + (step2, Message(role="user", blocks=(result(cid="c3", pid=None),))))
    assert codes(c2) == [("gemini_call_signature", "$.messages[7].blocks[0]")]


def test_flattened_call_in_user_text_is_not_model_output():
    flat = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    c = conv(Message(role="user", blocks=(Text(flat),)), A)
    assert codes(c) == []
    issues = validate(conv(Q, asst(Text("Checking. " + flat))))
    assert [(i.code, i.family, i.span) for i in issues] == [("flattened_tool_call", "chatml", (10, 10 + len(flat)))]


# --- severities ----------------------------------------------------------------------------------------

def test_severity_overrides_raise_lower_and_silence():
    fixture = load(FIXTURES / "unanswered_call_at_end.json")
    c = conv_of(fixture["trigger"])
    assert [i.severity for i in validate(c)] == ["warning"]
    assert not has_errors(validate(c))
    raised = ValidateConfig.from_overrides(["unanswered_call_at_end=error"])
    assert has_errors(validate(c, raised))
    assert validate(c, ValidateConfig({"unanswered_call_at_end": "off"})) == []


def test_unknown_code_or_level_is_a_config_error_that_lists_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        ValidateConfig.from_overrides(["orphan=off"])
    assert "orphan_result" in err.value.message and "flattened_tool_call" in err.value.message
    with pytest.raises(ConfigError):
        ValidateConfig.from_overrides(["orphan_result=fatal"])
    with pytest.raises(ConfigError):
        ValidateConfig.from_overrides(["orphan_result"])


# --- provider paths, through the real codecs -------------------------------------------------------------

def test_provider_paths_point_into_the_wire_record():
    anthropic = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "nope", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "x"},
                                     {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}
    issues = {i.code: i.provider_path for i in validate(formats.parse(anthropic, "anthropic"))}
    assert issues == {"unknown_tool": "$.messages[1].content[0]", "anthropic_results_first": "$.messages[2].content[1]"}
    chat = {"model": "m", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "[]"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        {"role": "tool", "tool_call_id": "call_2", "content": "r"}]}
    issues = {i.code: (i.path, i.provider_path) for i in validate(formats.parse(chat, "openai-chat"))}
    assert issues["arguments_not_object"] == ("$.messages[1].blocks[1]", "$.messages[2].tool_calls[1]")


# --- the command -----------------------------------------------------------------------------------------

def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["validate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_lines_one_per_record_with_parse_errors_as_issues(capsys):
    code, out, _ = run_cli(capsys, str(FIXTURES / "cli" / "mixed.jsonl"), "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [line["source"].rsplit(":", 1)[1] for line in lines] == ["1", "2", "3", "4", "5", "6"]
    got = [[i["code"] for i in line["issues"]] for line in lines]
    assert got == [[], ["anthropic_results_first"], ["flattened_tool_call"], ["gemini_call_signature"],
                   ["unknown_shape"], ["invalid_json"]]
    for line in lines:
        for issue in line["issues"]:
            assert {"code", "severity", "message", "path"} <= issue.keys()
    flat = lines[2]["issues"][0]
    assert flat["family"] == "chatml" and flat["provider_path"] == "$.messages[3].content"


def test_cli_exit_0_with_warnings_only_and_a_summary_table(capsys):
    code, out, _ = run_cli(capsys, str(FIXTURES / "cli" / "clean.jsonl"))
    assert code == 0
    assert "clean.jsonl:2" in out and "unanswered_call_at_end" in out and "issues by code" in out
    assert "2 records: 1 clean, 1 with warnings only, 0 with errors" in out


def test_cli_severity_flags_change_the_exit_code(capsys):
    clean = str(FIXTURES / "cli" / "clean.jsonl")
    assert run_cli(capsys, clean, "--severity", "unanswered_call_at_end=error")[0] == 1
    mixed = str(FIXTURES / "cli" / "mixed.jsonl")
    code, out, _ = run_cli(capsys, mixed, "--json", "--severity",
                           "anthropic_results_first=off,flattened_tool_call=warning",
                           "--severity", "gemini_call_signature=off")
    assert code == 1  # the unreadable records still count as errors
    assert [len(json.loads(line)["issues"]) for line in out.splitlines()] == [0, 0, 1, 0, 1, 1]


def test_cli_usage_errors_exit_2_and_list_valid_codes(capsys, tmp_path):
    code, _, err = run_cli(capsys, str(FIXTURES / "cli" / "clean.jsonl"), "--severity", "nope=off")
    assert code == 2 and "orphan_result" in err
    assert run_cli(capsys, str(tmp_path / "missing.jsonl"))[0] == 2
    with pytest.raises(SystemExit) as exit_:
        main(["validate"])
    assert exit_.value.code == 2


# --- properties ------------------------------------------------------------------------------------------

@st.composite
def damaged(draw) -> Conversation:
    """A well-formed exchange, then damaged the ways real logs are: turns dropped, duplicated or swapped,
    roles changed, ids collided, arguments broken, text holding call syntax, tools removed."""
    c = draw(conversations(reasoning_origin=draw(st.sampled_from([None, "anthropic", "openai-responses", "gemini"]))))
    messages = list(c.messages)
    for _ in range(draw(st.integers(0, 4))):
        if not messages:
            break
        i = draw(st.integers(0, len(messages) - 1))
        op = draw(st.sampled_from(["drop", "dup", "swap", "role", "blocks", "text"]))
        if op == "drop":
            del messages[i]
        elif op == "dup":
            messages.insert(i, messages[i])
        elif op == "swap" and i + 1 < len(messages):
            messages[i], messages[i + 1] = messages[i + 1], messages[i]
        elif op == "role":
            messages[i] = replace(messages[i], role=draw(st.sampled_from(["user", "assistant", "tool", "system"])))
        elif op == "blocks":
            blocks = [_damage_block(draw, b) for b in messages[i].blocks]
            messages[i] = replace(messages[i], blocks=tuple(draw(st.permutations(blocks))))
        else:
            body = draw(st.sampled_from(['<tool_call>{"name": "lookup", "arguments": {}}</tool_call>',
                                         "Action: lookup\nAction Input: x", "```json\n{\"name\": 1}\n```",
                                         '{"name": "lookup", "parameters": {"q": 1}}', "<|python_tag|>", ""]))
            messages[i] = replace(messages[i], blocks=messages[i].blocks + (Text(draw(text) + body),))
    tools = c.tools if draw(st.booleans()) else c.tools[:1] + (Tool(name="lookup", parameters=draw(_schemas)),)
    provider = draw(st.sampled_from([None, "anthropic", "openai-chat", "openai-responses", "gemini"]))
    shape = draw(st.sampled_from([None, "request", "messages", "response"]))
    return replace(c, messages=tuple(messages), tools=tools, meta=Meta(provider=provider, shape=shape))


_schemas = st.sampled_from([{"type": "object"}, {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}},
                            {"type": "nonsense"}, {"$ref": "#/$defs/missing"}, True, False,
                            {"properties": {"q": {"pattern": "["}}}, {"$schema": "urn:unknown", "type": "object"},
                            ["not", "a", "schema"], "string"])


def _damage_block(draw, block):
    if isinstance(block, ToolCall):
        return replace(block, provider_id=draw(st.sampled_from([block.provider_id, "dup", None])),
                       arguments=draw(st.sampled_from([block.arguments, [1], "x", None, {"q": {"deep": [1]}}])),
                       arguments_valid=draw(st.booleans()), raw_arguments=draw(st.sampled_from([None, "", "{", "[]"])))
    if isinstance(block, ToolResult):
        return replace(block, call_id=draw(st.sampled_from([block.call_id, None, "call_unknown"])),
                       name=draw(st.sampled_from([block.name, None, "other"])))
    if isinstance(block, Reasoning):
        return replace(block, signature=draw(st.sampled_from([block.signature, None, "", "[REDACTED_SIGNATURE]"])))
    return block


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_validation_never_raises_and_never_changes_the_conversation(c):
    before = to_json(c)
    issues = validate(c)
    assert to_json(c) == before
    for issue in issues:
        assert issue.code in RULES and issue.severity in ("error", "warning")
        assert issue.path.startswith("$.")
    assert validate(c) == issues  # deterministic


def _unique_provider_ids(c: Conversation) -> Conversation:
    """tests/strategies.py draws provider ids that can collide (toolu_1_0 twice), which is a real
    duplicate_call_id; give each call its own id so the exchange is well formed."""
    ids = {}
    messages = []
    for m in c.messages:
        blocks = []
        for b in m.blocks:
            if isinstance(b, ToolCall):
                ids[b.id] = f"toolu_{len(ids)}"
                b = replace(b, provider_id=ids[b.id])
            elif isinstance(b, ToolResult):
                b = replace(b, provider_id=ids.get(b.call_id))
            blocks.append(b)
        messages.append(replace(m, blocks=tuple(blocks)))
    return replace(c, messages=tuple(messages))


@settings(max_examples=150, deadline=None)
@given(conversations(reasoning_origin="anthropic").map(_unique_provider_ids))
def test_well_formed_exchanges_have_no_errors(c):
    assert not has_errors(validate(c)), [(i.code, i.path) for i in validate(c)]


# JSON records built from the vocabulary of the four formats, so that most reach deep into the codecs.
_keys = st.sampled_from(["messages", "role", "content", "type", "text", "tool_use", "tool_result", "id", "name",
                         "input", "tool_use_id", "tool_calls", "function", "arguments", "tool_call_id", "contents",
                         "parts", "functionCall", "functionResponse", "args", "response", "thoughtSignature",
                         "input_schema", "tools", "parameters", "thinking", "signature", "model", "choices",
                         "message", "candidates", "output", "call_id", "function_call", "reasoning", "summary",
                         "is_error", "user", "assistant", "model", "tool"])
_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | _keys | text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=5),
                     max_leaves=25)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_arbitrary_json_records_through_the_cli_path_raise_only_project_errors(value):
    try:
        c = parse_record(value, "fuzz.jsonl:1")
    except SftprepError:
        return
    validate(c)
    orjson.dumps([i.message for i in validate(c)])


# --- the corpus -------------------------------------------------------------------------------------------

# Every code the real corpus raises, each looked at (counts as of this writing, through `sftprep validate`'s
# reading path plus tau-bench's trajectories as OpenAI Chat message lists):
CORPUS_CODES = {
    # 142: logged responses that are calls (the exchange ends on the call): the warning by design.
    "unanswered_call_at_end",
    # 114: tau-bench trajectories (107) and Claude Code sessions (5) log no tool definitions; two pydantic-ai
    # OpenAI requests replay a call with no `tools`.
    "no_tool_list",
    # 48: tau-bench gpt-4o reuses a call id of an earlier, answered call (call_HGn16... at messages 7 and 11).
    "reused_call_id",
    # 11: pydantic-ai tool-search histories replay a `search_tools` call the request's tool list lacks.
    "unknown_tool",
    # 6: Claude Code writes thinking signatures as [REDACTED_SIGNATURE].
    "reasoning_placeholder_state",
    # 5: Claude Code assistant turns that open with a "\n\n" text block before the thinking.
    "anthropic_blank_text",
    # 3: an empty Gemini response, and two Anthropic refusals with empty content.
    "empty_assistant_turn",
    # 3: Gemini (Vertex) called get_file with {"type": "IMAGE"}; its schema allows no properties.
    "arguments_schema",
}

CORPUS_FOLDERS = ("pydantic_ai_anthropic", "pydantic_ai_openai_chat", "pydantic_ai_openai_responses",
                  "pydantic_ai_google", "vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat",
                  "vercel_ai_openai_responses", "claude_code_spotter_sessions")


@pytest.mark.slow
def test_corpus_raises_only_the_explained_codes(corpus):
    from corpus import tau_bench_trajectories
    from pipeline.ingest import expand_paths, iter_parsed
    seen: set[str] = set()
    parsed = 0
    for item in iter_parsed(expand_paths([str(corpus / folder) for folder in CORPUS_FOLDERS])):
        if item.conversation is not None:
            parsed += 1
            seen.update(i.code for i in validate(item.conversation))
    for _, traj in tau_bench_trajectories():
        seen.update(i.code for i in validate(formats.parse(traj, "openai-chat")))
    assert parsed > 500
    assert seen == CORPUS_CODES
