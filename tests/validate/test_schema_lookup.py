"""Tool schemas are looked up by their JSON (whole tool list, then each schema): schemas JSON tells
apart must not share an answer, and key order must not change one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.conversation import Conversation, Message, Text, Tool, ToolCall, ToolResult
from pipeline.validate import validate
from pipeline.validate.flattened import _TRIGGERS, _may_hold_call


def _conv(*tools: Tool, days) -> Conversation:
    calls = tuple(ToolCall(id=f"c{i}", name=t.name, arguments={"days": days}, provider_id=f"p{i}")
                  for i, t in enumerate(tools))
    results = tuple(Message(role="tool", blocks=(ToolResult(call_id=f"c{i}", name=t.name, content=(Text("ok"),)),))
                    for i, t in enumerate(tools))
    return Conversation(messages=(Message(role="user", blocks=(Text("go"),)), Message(role="assistant", blocks=calls),
                                  *results, Message(role="assistant", blocks=(Text("done"),))), tools=tools)


def _codes(conv: Conversation) -> list[tuple[str, str]]:
    return [(i.code, i.path) for i in validate(conv)]


def _tool(name: str, bound) -> Tool:
    return Tool(name=name, parameters={"type": "object", "properties": {"days": {"type": "integer", "maximum": bound}}})


def test_schemas_json_tells_apart_get_their_own_answers():
    valid, invalid = _tool("a", 1), _tool("a", True)  # `maximum: true` is no JSON Schema; 1 is
    for _ in range(2):  # the second round answers from the caches
        assert _codes(_conv(valid, days=2)) == [("arguments_schema", "$.messages[1].blocks[0].arguments.days")]
        assert _codes(_conv(invalid, days=2)) == [("invalid_tool_schema", "$.tools[0].parameters")]
        assert _codes(_conv(_tool("a", 1.5), days=2)) == [("arguments_schema", "$.messages[1].blocks[0].arguments.days")]
        assert _codes(_conv(_tool("a", 1.5), days=1)) == []


def test_a_tool_list_answers_like_its_schemas_one_by_one():
    ordered = Tool(name="b", parameters={"properties": {"days": {"type": "string"}}, "type": "object"})
    both = _conv(_tool("a", 1), ordered, days=5)
    expected = [("arguments_schema", "$.messages[1].blocks[0].arguments.days"),
                ("arguments_schema", "$.messages[1].blocks[1].arguments.days")]
    for _ in range(2):
        assert _codes(both) == expected
        assert _codes(_conv(ordered, days=5)) == [("arguments_schema", "$.messages[1].blocks[0].arguments.days")]
        assert _codes(_conv(_tool("b", True), _tool("a", 9), days=5)) == [("invalid_tool_schema", "$.tools[0].parameters")]


@given(st.lists(st.sampled_from([*"ab{[<|>=.｜_ ", *(t[:-1] for t in _TRIGGERS if len(t) > 1), *_TRIGGERS]))
       .map("".join))
def test_flattened_precheck_is_the_trigger_list(text):
    assert _may_hold_call(text) == any(t in text for t in _TRIGGERS)
    for trigger in _TRIGGERS:
        assert _may_hold_call(text + trigger)
