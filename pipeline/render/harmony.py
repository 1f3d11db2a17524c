"""Harmony, the gpt-oss format: the family's facts and the parser from its token stream back to a
canonical Conversation (its conversion is `_harmony_inputs`).

The format (what `templates/harmony.jinja` writes; openai-harmony is the reference for its tokens):
    <|start|>system<|message|>IDENTITY\\nKnowledge cutoff: 2024-06\\nCurrent date: DATE\\n\\nReasoning: medium\\n\\n
        # Valid channels: analysis, commentary, final. Channel must be included for every message.
        [\\nCalls to these tools must go to the commentary channel: 'functions'.]<|end|>
    [<|start|>developer<|message|>[# Instructions\\n\\nINSTRUCTIONS][\\n\\n# Tools\\n\\n## functions\\n\\n
        namespace functions {\\n\\nTOOL\\n\\n...} // namespace functions]<|end|>]
    <|start|>user<|message|>TEXT<|end|>
    <|start|>assistant<|channel|>analysis<|message|>REASONING<|end|>
    <|start|>assistant<|channel|>commentary<|message|>TEXT BEFORE A CALL<|end|>
    <|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>ARGS<|call|>
    <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>RESULT<|end|>
    <|start|>assistant<|channel|>final<|message|>TEXT<|return|>     (<|end|> unless it is the last message)

Every block of an assistant message is its own Harmony message, in block order: reasoning on the analysis
channel, each call its own commentary message, text on the final channel when it ends the message and on
the commentary channel (a preamble) when more follows. So parallel calls are all rendered, where the
official Jinja template renders only the first. Parse-back reads consecutive assistant messages as one
canonical message until a final one; two adjacent assistant messages whose first does not end with a
final answer would merge, so they are refused (code render_turn_boundary).

Two styles (the `style` of `family()`; the registered names are "harmony" and "harmony-jinja"):
- "harmony" (default): what openai-harmony's `render_conversation_for_training` gives for the same
  conversation: the `<|constrain|>` token before `json` in a call's header, results as their text.
- "jinja": what the official gpt-oss Jinja template (trl 1.16.0 `gptoss.jinja`) writes: the plain word
  `json` (no `<|constrain|>` token), results JSON-encoded (`tojson`: a text result is written as a quoted
  JSON string, reversibly), and `\\n\\n` after instructions when there are no tools. Registered with
  past_reasoning="drop", as that template drops the reasoning of earlier turns.
Both styles write tool signatures as openai-harmony does; the official template writes some schemas
differently (an empty parameter object as `() => any`, `integer` inside type lists, defaults followed by
a comma, nested objects and `oneOf` with stray whitespace, no titles, examples or object descriptions,
multi-line descriptions unprefixed): outside what its conformance covers.

What the format cannot carry, each ledgered: system instructions go to the developer message's
# Instructions (folded; Harmony's system message holds identity and settings), schema keywords a
TypeScript signature loses (dropped, at the tool's parameters), is_error, media, signatures and opaque
reasoning state, reasoning of earlier turns under past_reasoning="drop".
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Literal

from msgspec import structs

from ..conversation import Block, Conversation, Message, Meta, Reasoning, Text, Tool, ToolCall, ToolResult
from ..errors import ConfigError, RenderError
from ..ids import CallIds
from ..ledger import LedgerEntry
from . import _harmony_typescript as ts
from ._harmony_inputs import POLICY, build_inputs
from ._roundtrip import without_dropped
from ._tool_inputs import tool_parameters
from .templates import Family

Style = Literal["harmony", "jinja"]
PastReasoning = Literal["keep", "drop"]
STYLES: tuple[str, ...] = ("harmony", "jinja")

START, MESSAGE, CHANNEL = "<|start|>", "<|message|>", "<|channel|>"
END, CALL, RETURN, CONSTRAIN = "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"
INSTRUCTIONS = "# Instructions\n\n"
TOOLS_OPEN = "# Tools\n\n## functions\n\nnamespace functions {\n\n"
TOOLS_CLOSE = "} // namespace functions"
_TOOL_END = " => any;\n\n"
_RESULT_SUFFIX = " to=assistant"


def call_format(style: str) -> str:
    """What follows `commentary ` in a call's header."""
    return CONSTRAIN + "json" if style == "harmony" else "json"


# --- what parse-back must equal -------------------------------------------------------------------------

def _as_rendered(tool: Tool) -> Tool:
    """A tool as its signature carries it: the description by lines, the schema read back from its text."""
    lines = ts.description_lines(tool.description)
    return Tool(name=tool.name, description="\n".join(lines) if lines else None,
                parameters=ts.read_signature(ts.signature(tool_parameters(tool))))


def expected(conv: Conversation, ledger: tuple[LedgerEntry, ...]) -> Conversation:
    """`conv` without what the ledger dropped, its tools as their signatures carry them."""
    kept = without_dropped(conv, ledger)
    return structs.replace(kept, tools=tuple(_as_rendered(t) for t in kept.tools))


# --- parse-back ---------------------------------------------------------------------------------------

def _fail(what: str, index: int) -> RenderError:
    return RenderError(what, path=f"$.message[{index}]", code="parse_back")


def parse_back(text: str, style: str = "harmony") -> Conversation:
    """The conversation a Harmony token stream (text with special tokens) holds, for streams written in
    `style`. Raises RenderError on text the template cannot produce."""
    if not text.startswith(START):
        raise _fail(f"text before the first message: {text[:60]!r}", 0)
    chunks = text.split(START)[1:]
    reader = _Reader(style)
    for index, chunk in enumerate(chunks):
        header, sep, rest = chunk.partition(MESSAGE)
        if not sep:
            if index == len(chunks) - 1 and chunk == "assistant" and index > 0:
                break  # a generation prompt
            raise _fail(f"a message header without <|message|>: {chunk[:60]!r}", index)
        ends = [end for end in (END, CALL, RETURN) if rest.endswith(end)]
        if len(ends) != 1 or any(token in rest[:-len(ends[0])] for token in (END, CALL, RETURN)):
            raise _fail("a message must end with exactly one <|end|>, <|call|> or <|return|>", index)
        if ends[0] == RETURN and index != len(chunks) - 1:
            raise _fail("<|return|> ends only the last message", index)
        reader.message(index, header, rest[:-len(ends[0])], ends[0])
    return reader.finish()


class _Reader:
    def __init__(self, style: str) -> None:
        self.style = style
        self.messages: list[Message] = []
        self.developer: tuple[Text, ...] = ()
        self.tools: tuple[Tool, ...] = ()
        self.ids = CallIds()
        self.pending: list[ToolCall] = []  # calls not answered yet, in order
        self.current: list[Block] | None = None  # blocks of the assistant message being read

    def close(self) -> None:
        if self.current is not None:
            self.messages.append(Message(role="assistant", blocks=tuple(self.current)))
            self.current = None

    def message(self, index: int, header: str, body: str, end: str) -> None:
        head, _, channel = header.partition(CHANNEL)
        if index == 0:
            if header != "system":
                raise _fail("the first message must be the system message", index)
            return
        if head == "assistant" or head.startswith("assistant to="):
            self.assistant(index, head, channel, body, end)
            return
        self.close()
        if end != END:
            raise _fail(f"a {head} message must end with <|end|>", index)
        if head == "developer" and index == 1 and not channel:
            self.developer, self.tools = _developer(body, self.style, index)
        elif head in ("user", "system", "developer") and not channel:
            self.messages.append(Message(role=head, blocks=(Text(body),) if body else ()))  # type: ignore[arg-type]
        elif head.startswith("functions.") and head.endswith(_RESULT_SUFFIX) and channel == "commentary":
            self.result(index, head[len("functions."):-len(_RESULT_SUFFIX)], body)
        else:
            raise _fail(f"not a harmony message header: {header[:60]!r}", index)

    def assistant(self, index: int, head: str, channel: str, body: str, end: str) -> None:
        if self.current is None:
            self.current = []
        if head != "assistant":
            recipient = head[len("assistant to="):]
            if not recipient.startswith("functions."):
                raise _fail(f"a call to {recipient!r}: only the functions namespace is rendered", index)
            expected_header = "commentary " + call_format(self.style)
            if channel != expected_header:
                other = "jinja" if self.style == "harmony" else "harmony"
                hint = (f" (a stream in the {other} style: parse it with family '{_name(other, None)}')"
                        if channel == "commentary " + call_format(other) else "")
                raise _fail(f"a call header must end with {expected_header!r}, not {channel!r}{hint}", index)
            if end != CALL:
                raise _fail("a call must end with <|call|>", index)
            name = recipient[len("functions."):]
            try:
                arguments = json.loads(body)
            except ValueError:
                raise _fail(f"call arguments are not JSON: {body[:60]!r}", index) from None
            if not isinstance(arguments, dict):
                raise _fail("call arguments must be a JSON object", index)
            call = ToolCall(id=self.ids.new(name, arguments), name=name, arguments=arguments)
            self.current.append(call)
            self.pending.append(call)
            return
        if end == CALL:
            raise _fail("<|call|> ends only a call", index)
        match channel:
            case "analysis":
                self.current.append(Reasoning(text=body))
            case "commentary":
                self.current.append(Text(body))
            case "final":
                if body:
                    self.current.append(Text(body))
                self.close()
            case _:
                raise _fail(f"unknown assistant channel {channel!r}", index)
        if end == RETURN and channel != "final":
            raise _fail("<|return|> ends only a final message", index)

    def result(self, index: int, name: str, body: str) -> None:
        content = body
        if self.style == "jinja":
            try:
                content = json.loads(body)
            except ValueError:
                raise _fail(f"a result must be a JSON string in the jinja style: {body[:60]!r}", index) from None
            if not isinstance(content, str):
                raise _fail("a result must be a JSON string in the jinja style", index)
        call = next((c for c in self.pending if c.name == name), None)
        if call is not None:
            self.pending.remove(call)
        result = ToolResult(call_id=call.id if call else None, name=name, content=(Text(content),) if content else ())
        self.messages.append(Message(role="tool", blocks=(result,)))

    def finish(self) -> Conversation:
        self.close()
        return Conversation(messages=tuple(self.messages), developer=self.developer, tools=self.tools,
                            meta=Meta(notes=("parsed back from harmony; results paired with the first unanswered "
                                             "call of their tool",)))


def _developer(body: str, style: str, index: int) -> tuple[tuple[Text, ...], tuple[Tool, ...]]:
    if body.startswith(TOOLS_OPEN):
        return (), _read_tools(body, index)
    if not body.startswith(INSTRUCTIONS):
        raise _fail("a developer message must start with # Instructions or # Tools", index)
    rest = body[len(INSTRUCTIONS):]
    if rest.endswith(TOOLS_CLOSE):
        at = rest.find("\n\n" + TOOLS_OPEN)
        while at != -1:  # instructions may hold the header's text: take the first split that reads
            try:
                return (Text(rest[:at]),), _read_tools(rest[at + 2:], index)
            except RenderError:
                at = rest.find("\n\n" + TOOLS_OPEN, at + 1)
    if style == "jinja":
        if not rest.endswith("\n\n"):
            raise _fail("instructions without tools end with a blank line in the jinja style", index)
        rest = rest[:-2]
    return (Text(rest),), ()


def _read_tools(text: str, index: int) -> tuple[Tool, ...]:
    if not (text.startswith(TOOLS_OPEN) and text.endswith(TOOLS_CLOSE)):
        raise _fail("not a functions namespace", index)
    pos, stop = len(TOOLS_OPEN), len(text) - len(TOOLS_CLOSE)
    tools: list[Tool] = []
    while pos < stop:
        lines = []
        while text.startswith("// ", pos) and text.find("\n", pos) != -1:
            end = text.find("\n", pos)
            lines.append(text[pos + 3:end])
            pos = end + 1
        equals = text.find(" = ", pos)
        if not text.startswith("type ", pos) or equals == -1:
            raise _fail(f"not a tool definition: {text[pos:pos + 60]!r}", index)
        end = text.find(_TOOL_END, equals)
        # A property description could hold the end marker: the definition ends where the next begins.
        while end != -1 and (after := end + len(_TOOL_END)) != stop and not text.startswith(("// ", "type "), after):
            end = text.find(_TOOL_END, end + 1)
        if end == -1:
            raise _fail(f"unterminated tool definition: {text[pos:pos + 60]!r}", index)
        tools.append(Tool(name=text[pos + 5:equals], description="\n".join(lines) if lines else None,
                          parameters=ts.read_signature(text[equals + 3:end + len(_TOOL_END) - 3])))
        pos = end + len(_TOOL_END)
    return tuple(tools)


# --- the family ---------------------------------------------------------------------------------------

def _name(style: str, past_reasoning: str | None) -> str:
    defaults = {"harmony": "keep", "jinja": "drop"}
    base = "harmony" if style == "harmony" else "harmony-jinja"
    if past_reasoning is None or past_reasoning == defaults[style]:
        return base
    return f"{base}(past_reasoning={past_reasoning})"


def _carries(style: str, past_reasoning: str) -> tuple[tuple[str, str], ...]:
    return (("text beside calls", "kept, in block order: commentary preambles"),
            ("parallel calls", "all, one message each"),
            ("reasoning", "analysis channel" + (", every turn" if past_reasoning == "keep" else
                                                "; earlier turns dropped as the official template does")),
            ("call ids", "none: a result answers the first unanswered call of its name"),
            ("tool results", "text" if style == "harmony" else "JSON-encoded (tojson), as the official template"),
            ("system", "folded into the developer message's # Instructions"), ("developer", "kept"),
            ("media", "dropped; text documents as text"))


def family(style: Style = "harmony", past_reasoning: PastReasoning | None = None) -> Family:
    """The Harmony family in a style ("harmony": openai-harmony's tokens; "jinja": the official Jinja
    template's text), keeping or dropping the reasoning of earlier turns (default: "keep" for harmony,
    "drop" for jinja, as each reference does)."""
    if style not in STYLES:
        raise ConfigError(f"unknown harmony style '{style}'; valid: {', '.join(STYLES)}", code="unknown_style")
    if past_reasoning is None:
        past_reasoning = "keep" if style == "harmony" else "drop"
    if past_reasoning not in ("keep", "drop"):
        raise ConfigError(f"unknown past_reasoning '{past_reasoning}'; valid: keep, drop", code="unknown_style")
    required = (START, MESSAGE, CHANNEL, END, CALL, RETURN) + ((CONSTRAIN,) if style == "harmony" else ())
    return Family(name=_name(style, past_reasoning), policy=replace(POLICY, style=style, past_reasoning=past_reasoning),
                  template_file="harmony.jinja", eot_tokens=(END, CALL, RETURN), required_tokens=required,
                  parse_back=partial(parse_back, style=style), build_inputs=build_inputs, default_tokenizer="gpt-oss",
                  expected=expected, template_vars=(("harmony_style", style),),
                  carries=_carries(style, past_reasoning))


FAMILY = family()
JINJA_FAMILY = family("jinja")
