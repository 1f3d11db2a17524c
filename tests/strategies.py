"""Hypothesis strategies for canonical conversations shaped like real tool-using exchanges:
user turns, assistant turns with reasoning, text around (parallel) calls, results with errors and
images, unicode and empty strings."""

from __future__ import annotations

from hypothesis import strategies as st

from pipeline.conversation import Conversation, Media, Message, Reasoning, Text, Tool, ToolCall, ToolResult
from pipeline.ids import CallIds

# Text the providers accept: no lone surrogates, no NUL.
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
nonempty_text = text.filter(lambda s: s.strip() != "")
tool_names = st.sampled_from(["get_weather", "search_flights", "lookup", "run_sql", "send_email"])
json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | text
arguments = st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
                            st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                                         | st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), inner,
                                                           max_size=3), max_leaves=6),
                            max_size=4)
PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
image = st.just(Media(kind="image", media_type="image/png", data=PNG_1PX))


@st.composite
def conversations(draw, *, reasoning_origin: str | None = None, images: bool = True) -> Conversation:
    """A user/assistant/tool exchange of 1-3 rounds, calls always answered, ending on the assistant."""
    ids = CallIds()
    provider_ids = iter(range(1, 10**6))  # provider ids are unique, as real APIs make them
    messages: list[Message] = []
    used_tools: dict[str, None] = {}
    rounds = draw(st.integers(1, 3))
    for r in range(rounds):
        user_blocks = [Text(draw(nonempty_text))]
        if images and draw(st.booleans()):
            user_blocks.append(draw(image))
        messages.append(Message(role="user", blocks=tuple(user_blocks)))
        for _step in range(draw(st.integers(0, 2))):
            blocks: list = []
            if reasoning_origin and draw(st.booleans()):
                blocks.append(Reasoning(text=draw(nonempty_text), signature="c2lnbmF0dXJl" * 4,
                                        origin=reasoning_origin))
            if draw(st.booleans()):
                blocks.append(Text(draw(nonempty_text)))
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                name = draw(tool_names)
                args = draw(arguments)
                used_tools[name] = None
                calls.append(ToolCall(id=ids.new(name, args), name=name, arguments=args,
                                      provider_id=f"toolu_{next(provider_ids)}_{draw(st.integers(0, 10**6))}"))
            blocks.extend(calls)
            messages.append(Message(role="assistant", blocks=tuple(blocks)))
            results = []
            for call in calls:
                content: list = [Text(draw(text))]
                if images and draw(st.integers(0, 4)) == 0:
                    content.append(draw(image))
                results.append(ToolResult(call_id=call.id, provider_id=call.provider_id, name=call.name,
                                          content=tuple(content), is_error=draw(st.integers(0, 3)) == 0,
                                          matched_by="id"))
            messages.append(Message(role="tool", blocks=tuple(results)))
        messages.append(Message(role="assistant", blocks=(Text(draw(nonempty_text)),)))
    system = (Text(draw(nonempty_text)),) if draw(st.booleans()) else ()
    tools = tuple(Tool(name=name, description=f"The {name} tool.",
                       parameters={"type": "object", "properties": {}}) for name in used_tools)
    return Conversation(messages=tuple(messages), system=system, tools=tools)
