"""Hypothesis strategies for the differential tests of the built-in templates: canonical conversations
with edge cases in every field (blank and padded texts, template syntax and JSON in text, unicode, long
texts; arguments with unicode keys, odd numbers, nesting, empty objects, or logged as a JSON string;
parallel calls, results in a row, structured and empty results, system and developer text, reasoning,
turns in unusual orders). A `Shape` narrows them to what a family's reference can be compared on."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from hypothesis import strategies as st

from pipeline.conversation import Conversation, Message, Reasoning, Text, Tool, ToolCall, ToolResult
from pipeline.ids import CallIds

# Strings that trip templates and tokenizers: whitespace at the edges, template and JSON syntax, escapes,
# unicode whitespace (which `trim` and `strip` remove), combining marks, astral characters.
EDGE_STRINGS = ("", " ", "\n", "\n\n", "  padded  ", "\nnewlines\n\n", "\ttab\t", "a\r\nb", "{{ messages }}",
                "{% if x %}y{% endif %}", "{#", '{"name": "f", "arguments": {}}', '{"a": 1}', "[1, 2]", "null",
                '"quoted"', "back\\slash", "<|im_start", "# Tools", "e\u0301", "\u00a0nbsp\u00a0", "\u3000wide\u3000",
                "line\u2028sep", "\x85nel", "zero\u200bwidth", "东京 😀", "Grüße", "\ufb01 ligature", "\x1f unit",
                "1.0", "-0", "true")
# Mistral's control tokens are plain text to the other families.
MISTRAL_TOKENS = ("</s>x", "[INST]", "[TOOL_CALLS]")
_CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cs", "Co", "Cn"), exclude_characters="\x00")
_LONG = st.builds(lambda piece, n: piece * n, st.sampled_from(["lorem ipsum ", "数据 ", "\n", "ab"]),
                  st.integers(200, 1500))


def edge_text(extra: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    plain = st.text(alphabet=_CHARACTERS, max_size=24)
    edges = st.sampled_from(EDGE_STRINGS + extra)
    return st.one_of(edges, plain, _LONG, st.builds(str.__add__, edges, plain))


_KEYS = st.sampled_from(["q", "city", "", " ", "ключ", "東京", "😀", 'quote"d', "new\nline", "a b", "$ref", "1"])
_NUMBERS = st.sampled_from([0, 1, -1, 1.0, -0.0, 0.5, 1e20, 1e-7, 2**53 + 1, -(2**63), 12345678901234567890123456789,
                            3.141592653589793, 1.5e300])
_SCHEMAS = st.sampled_from([
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"q": {"type": "string", "description": "the query"}}, "required": ["q"]},
    {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
                                      "mode": {"type": "string", "enum": ["a", "b"]}}},
    {"type": "object", "properties": {"x": {"type": "number", "description": "Grüße \"q\""}, "b": {"type": "boolean"}},
     "required": ["x", "b"]},
])


def json_values(text: st.SearchStrategy[str]) -> st.SearchStrategy:
    scalars = st.none() | st.booleans() | _NUMBERS | st.integers(-10**6, 10**6) | text
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
                        max_leaves=8)


@dataclass(frozen=True)
class Shape:
    """What a family's reference can be compared on."""

    parallel: bool = True  # several calls in one assistant message
    text_beside_calls: bool = True
    structured_results: bool = True  # results holding a JSON object, no text
    opening_assistant: bool = True  # a conversation may open with an assistant turn
    system_midway: bool = True  # a system or developer message after the first turn
    extra_strings: tuple[str, ...] = MISTRAL_TOKENS  # more edge strings
    names: tuple[str, ...] = ("get_weather", "lookup", "f", "search.web", "tool_2", "名前")


@st.composite
def conversations(draw, shape: Shape = Shape()) -> Conversation:
    """1-3 rounds of user turns, assistant calls answered by results, and an answer; sometimes more around
    them (an opening assistant turn, a system or developer message midway, a second answer, a closing user
    turn or call), and system, developer and tool definitions."""
    text = edge_text(shape.extra_strings)
    values = json_values(text)
    ids, provider_ids = CallIds(), itertools.count(1)
    messages: list[Message] = []
    used: dict[str, None] = {}

    def texts() -> tuple[Text, ...]:
        return tuple(Text(draw(text)) for _ in range(draw(st.integers(1, 2))))

    def reasoning() -> list[Reasoning]:
        return [Reasoning(text=draw(text))] if draw(st.booleans()) else []

    def call(name: str, arguments: dict) -> ToolCall:
        used[name] = None
        common = dict(id=ids.new(name, arguments), name=name, provider_id=f"call_{next(provider_ids)}")
        if draw(st.integers(0, 3)) == 0:  # as OpenAI logs it: the arguments as a JSON string
            raw = json.dumps(arguments, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
            return ToolCall(raw_arguments=raw, **common)
        return ToolCall(arguments=arguments, **common)

    def result(call: ToolCall) -> ToolResult:
        common = dict(call_id=call.id, provider_id=call.provider_id, name=call.name, matched_by="id")
        kind = draw(st.sampled_from(["text", "json", "empty", "output"][:4 if shape.structured_results else 3]))
        if kind == "output":
            return ToolResult(output=draw(st.dictionaries(_KEYS, values, max_size=3)), **common)
        content = {"text": draw(text), "json": json.dumps(draw(values), ensure_ascii=draw(st.booleans())),
                   "empty": ""}[kind]
        return ToolResult(content=(Text(content),), **common)

    if shape.opening_assistant and draw(st.integers(0, 5)) == 0:
        messages.append(Message(role="assistant", blocks=texts()))
    for _round in range(draw(st.integers(1, 3))):
        if shape.system_midway and messages and draw(st.integers(0, 5)) == 0:
            role = draw(st.sampled_from(["system", "developer"]))
            messages.append(Message(role=role, blocks=(Text(draw(text)),)))
        messages += [Message(role="user", blocks=texts()) for _ in range(draw(st.integers(1, 2)))]
        for _step in range(draw(st.integers(0, 2))):
            calls = [call(draw(st.sampled_from(shape.names)), draw(st.dictionaries(_KEYS, values, max_size=4)))
                     for _ in range(draw(st.integers(1, 3)) if shape.parallel else 1)]
            beside = list(texts()) if shape.text_beside_calls and draw(st.booleans()) else []
            messages.append(Message(role="assistant", blocks=tuple(reasoning() + beside + calls)))
            results = [result(c) for c in calls]
            if draw(st.booleans()):
                messages.append(Message(role="tool", blocks=tuple(results)))
            else:
                messages += [Message(role="tool", blocks=(r,)) for r in results]
        messages.append(Message(role="assistant", blocks=tuple(reasoning()) + texts()))
        if draw(st.integers(0, 4)) == 0:
            messages.append(Message(role="assistant", blocks=texts()))
    if draw(st.integers(0, 4)) == 0:
        if used and draw(st.booleans()):
            last = call(next(iter(used)), {})
            messages += [Message(role="assistant", blocks=(last,)), Message(role="tool", blocks=(result(last),))]
        else:
            messages.append(Message(role="user", blocks=texts()))
    system = texts() if draw(st.booleans()) else ()
    developer = (Text(draw(text)),) if draw(st.integers(0, 3)) == 0 else ()
    tools = tuple(_tool(draw, text, name) for name in used if draw(st.integers(0, 5)) > 0)
    return Conversation(messages=tuple(messages), system=system, developer=developer, tools=tools)


def _tool(draw, text: st.SearchStrategy[str], name: str) -> Tool:
    description = draw(st.none() | text)
    if draw(st.integers(0, 3)) == 0:
        return Tool(name=name, description=description)
    return Tool(name=name, description=description, parameters=draw(_SCHEMAS))
