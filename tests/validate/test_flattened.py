"""The flattened-call detector: a positive and its near misses for every syntax family, the signals
(code, tool list, whole block), and a survey of every text in the third-party corpus."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import CASSETTE_FOLDERS, CORPUS
from pipeline import formats
from pipeline.conversation import Text
from pipeline.validate.flattened import FAMILIES, find_flattened
from pipeline.validate import RULES, ValidateConfig, validate

TOOLS = {"get_weather", "search_flights", "Bash"}

# (family, text, the flagged span's text, the called name)
POSITIVES = [
    ("chatml", 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', "get_weather"),
    ("chatml", '<tool_call>\n<function=search_flights>\n<parameter=origin>\nOSL\n</parameter>\n</function>\n'
               '</tool_call>', None, "search_flights"),  # Qwen3-Coder's XML body
    ("chatml", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}', None, "get_weather"),  # unclosed
    ("llama_json", '{"name": "get_weather", "parameters": {"city": "Oslo"}}', None, "get_weather"),
    ("python_tag", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}', None, "get_weather"),
    ("python_tag", '<|python_tag|>brave_search.call(query="Oslo weather")', None, "brave_search"),
    ("function_tag", 'Checking now. <function=get_weather>{"city": "Oslo"}</function>',
     '<function=get_weather>{"city": "Oslo"}</function>', "get_weather"),
    ("harmony", '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
                '<|message|>{"city":"Oslo"}<|call|>', None, "get_weather"),
    ("harmony", 'commentary to=functions.get_weather json{"city": "Oslo"}', 'to=functions.get_weather json'
                                                                          '{"city": "Oslo"}', "get_weather"),
    ("react", 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Oslo"}',
     'Action: get_weather\nAction Input: {"city": "Oslo"}', "get_weather"),
    ("react", "Thought: look it up\nAction: search_flights[OSL to BGO]", "Action: search_flights[OSL to BGO]",
     "search_flights"),
    ("react", 'Action:\n```json\n{"action": "get_weather", "action_input": {"city": "Oslo"}}\n```', None,
     "get_weather"),
    ("json", '{"name": "get_weather", "arguments": {"city": "Oslo"}}', None, "get_weather"),
    ("json", '[{"id": "call_1", "type": "function", "function": {"name": "get_weather", '
             '"arguments": "{\\"city\\": \\"Oslo\\"}"}}]', None, "get_weather"),
    ("json", 'I will look that up.\n{"name": "search_flights", "arguments": {"origin": "OSL"}}',
     '{"name": "search_flights", "arguments": {"origin": "OSL"}}', "search_flights"),
    ("json", '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```',
     '{"name": "get_weather", "arguments": {"city": "Oslo"}}', "get_weather"),  # the reply is only the fence
    ("marker", 'One moment. [Calling tool: get_weather(city="Oslo")]', '[Calling tool: get_weather(city="Oslo")]',
     "get_weather"),
    ("marker", '[Tool call: search_flights({"origin": "OSL"})]', None, "search_flights"),
    ("marker", '[Called get_weather with {"city": "Oslo"}]', None, "get_weather"),
    ("xml_invoke", '<function_calls>\n<invoke name="Bash">\n<parameter name="command">ls</parameter>\n</invoke>\n'
                   '</function_calls>', None, "Bash"),
    ("special_token", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]', None, "get_weather"),
    ("tool_code", 'Let me look.\n```tool_code\nprint(default_api.get_weather(city="Oslo"))\n```',
     '```tool_code\nprint(default_api.get_weather(city="Oslo"))\n```', "get_weather"),
    ("tool_code", 'print(default_api.get_weather(city="Oslo"))', None, "get_weather"),
]

# (family it must not be mistaken for, text)
NEAR_MISSES = [
    ("chatml", "For each function call, return a json object with function name and arguments within "
               '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
               "<args-json-object>}\n</tool_call>"),
    ("chatml", 'Qwen wraps calls like `<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>`.'),
    ("chatml", 'Example:\n\n```xml\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
               '</tool_call>\n```\n\nThe parser turns that into a call block.'),
    ("llama_json", '{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": '
                   '{"type": "string"}}}}'),  # a tool definition, not a call
    ("llama_json", '{"name": "Ada Lovelace", "parameters": {"born": 1815}}'),  # not a function name
    ("python_tag", "Llama 3.1 starts built-in tool calls with `<|python_tag|>`, then the call."),
    ("function_tag", "The custom format is `<function=NAME>{...}</function>` per the Llama docs."),
    ("harmony", "Harmony headers look like to=functions.get_weather, followed by the channel."),
    ("harmony", "Use `<|channel|>commentary to=functions.get_weather` for the header."),
    ("react", "Action: Cancel the reservation and refund the card.\nAction Input: none needed"),
    ("react", "Next Action: none.\n\nThe customer is satisfied."),
    ("react", "Case summary.\nAction: refund issued\nStatus: closed"),
    ("react", "ReAct interleaves lines such as\nAction: lookup\nAction Input: Oslo\nand then an Observation."),
    ("react", "```\nThought: think\nAction: get_weather\nAction Input: Oslo\n```"),
    ("json", '{"name": "Alice", "age": 30, "email": "alice@example.com"}'),
    ("json", '{"name": "get_weather", "result": {"temp_c": 4}}'),  # a result naming its tool
    ("json", '{"name": "api-config", "metadata": {"author": "Alice", "version": "1.0"}}'),
    ("json", 'Here is how a call looks:\n\n```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```\n'
             "The runtime executes it."),
    ("json", 'The data:\n{"name": "lookup", "arguments": {"q": 1}}'),  # inside prose, not a defined tool
    ("json", '{"discovered_tools": [{"name": "lookup_exchange_rate"}]}'),
    ("marker", "See [Tool: none] in the table, and [function: optional] below."),
    ("marker", "Links like [calling convention](https://example.com) are prose."),
    ("xml_invoke", 'Claude once used `<invoke name="Bash">` tags; see the docs.'),
    ("special_token", "Mistral marks calls with the `[TOOL_CALLS]` token."),
    ("tool_code", 'Older Gemini code looked like this:\n```python\nprint(default_api.get_weather(city="Oslo"))\n```\n'
                  "Now the API returns function calls instead."),
    ("tool_code", "The module is called `default_api.get_weather(...)` in those traces."),
]


@pytest.mark.parametrize("family, text, span, name", POSITIVES, ids=lambda v: v if isinstance(v, str) and
                         v in FAMILIES else None)
def test_each_syntax_family_is_found_with_its_span(family, text, span, name):
    found = find_flattened(text, TOOLS)
    assert [f.family for f in found] == [family], found
    f = found[0]
    assert f.name == name
    assert f.known_tool == (name in TOOLS)
    assert text[f.start:f.end] == (span if span is not None else text.strip())


@pytest.mark.parametrize("family, text", NEAR_MISSES)
def test_near_misses_are_not_flagged(family, text):
    assert find_flattened(text, TOOLS) == []


def test_every_family_has_a_positive_and_a_near_miss():
    assert {f for f, *_ in POSITIVES} == set(FAMILIES)
    assert {f for f, _ in NEAR_MISSES} == set(FAMILIES)


def test_tool_list_is_a_signal_for_json_in_prose_and_fenced_replies():
    prose = 'Let me check.\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    assert [f.family for f in find_flattened(prose, {"get_weather"})] == ["json"]
    assert find_flattened(prose, set()) == []
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'
    assert find_flattened(fenced, {"get_weather"}) and not find_flattened(fenced, {"other"})


def test_loose_syntaxes_need_a_defined_tool_when_the_conversation_defines_tools():
    react = "Thought: look it up\nAction: Search[Oslo weather]"
    marker = '[Calling tool: lookup(q="Oslo")]'
    for text in (react, marker):
        assert find_flattened(text, set()), text  # no tool list: a function-like name is enough
        assert find_flattened(text, TOOLS) == [], text  # a tool list without it: an example, not a call


def test_several_calls_in_one_text_are_each_reported():
    text = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Bergen"}}</tool_call>')
    found = find_flattened(text, TOOLS)
    assert [(f.family, f.start) for f in found] == [("chatml", 0), ("chatml", text.index("\n") + 1)]


_pieces = st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name": ', '"get_weather"',
                           '"arguments": ', "```", "`", "\n", "Action: ", "Action Input: ", "to=functions.x",
                           "<|message|>", "<|call|>", "<|python_tag|>", "<function=f>", "</function>",
                           '<invoke name="x">', "</invoke>", "[TOOL_CALLS]", "default_api.f(", "[Calling tool: f(",
                           ")]", " ", "prose "])


@settings(max_examples=500, deadline=None)
@given(st.lists(_pieces | st.text(max_size=5), max_size=30).map("".join), st.sets(st.sampled_from(["x", "f",
                                                                                                    "get_weather"])))
def test_detector_never_raises_and_spans_stay_in_the_text(text, tools):
    for f in find_flattened(text, tools):
        assert 0 <= f.start < f.end <= len(text) and f.family in FAMILIES
        assert f.known_tool == (f.name in tools)


@pytest.mark.parametrize("text", ["a ` b\n" * 100_000, "{\n" * 100_000, '{"name": \n' * 100_000,
                                  '<invoke name="x">' * 20_000, "<tool_call>{" * 20_000, "Action: x\n" * 50_000,
                                  "[tool: x" * 50_000, "to=functions.x " * 50_000, "default_api.x(" * 20_000],
                         ids=["backticks", "braces", "names", "invoke", "tool_call", "action", "marker", "harmony",
                              "default_api"])
def test_long_adversarial_text_finishes(text):
    """Backtracking that grows with the square of these texts (hundreds of thousands of characters)
    would run for hours; a linear scan ends in well under a second. The alarm is a hang guard, not a
    speed measurement (bench/ measures speed)."""
    import signal

    def hung(signum, frame):
        raise AssertionError("find_flattened did not finish within 60 s: super-linear on this text")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        found = find_flattened(text, {"x"})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert all(0 <= f.start < f.end <= len(text) and f.family in FAMILIES for f in found)


def test_detector_is_total_on_odd_text():
    for text in ("", "{", "[", "<tool_call>", "<|python_tag|>", "Action:", "to=functions.", "```", "`" * 7,
                 '{"name": "x", "arguments": "{"}', "[" * 5000, "{" * 5000 + "}" * 5000, "\ud7ff\x00<invoke"):
        find_flattened(text, TOOLS)


# --- survey over every text in the corpus ------------------------------------------------------------------

def _tool_names(doc: Any) -> set[str]:
    names: set[str] = set()

    def walk(node: Any, under_tools: bool) -> None:
        if isinstance(node, dict):
            if under_tools:
                inner = node.get("function")
                name = inner.get("name") if isinstance(inner, dict) else node.get("name")
                if isinstance(name, str):
                    names.add(name)
            for key, value in node.items():
                walk(value, under_tools or key in ("tools", "functionDeclarations", "function_declarations"))
        elif isinstance(node, list):
            for value in node:
                walk(value, under_tools)

    walk(doc, False)
    return names


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def _stream_events(text: str) -> list[Any]:
    """The JSON events of an SSE body or a chunks file (one JSON per line); undecodable lines as text."""
    events: list[Any] = []
    for line in text.splitlines():
        body = line[5:].strip() if line.startswith("data:") else line
        try:
            events.append(json.loads(body))
        except ValueError:
            events.append(line)
    return events


def _stream_texts(events: list[Any]) -> list[str]:
    """Text deltas joined per block, so that a call split over chunks is seen whole. Grouped by the
    event's path and index fields: crude, but enough to rebuild every provider's text streams."""
    joined: dict[tuple, str] = defaultdict(str)

    def walk(node: Any, at: tuple) -> None:
        if isinstance(node, dict):
            at = at + tuple(node[k] for k in ("index", "output_index", "content_index") if isinstance(node.get(k), int))
            for key, value in node.items():
                if isinstance(value, str) and key in ("text", "delta", "content", "thinking"):
                    joined[at + (key,)] += value
                else:
                    walk(value, at + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, at + (i,))

    for event in events:
        walk(event, ())
    return list(joined.values())


def corpus_texts() -> Iterator[tuple[str, set[str], str]]:
    """(source, tool names defined nearby, text) for every string in the corpus: request and response
    bodies of every cassette, streamed bodies both per event and re-joined, vercel responses and chunks,
    tau-bench trajectories and every line of the Claude Code sessions."""
    for folder in CASSETTE_FOLDERS:
        for path in sorted((CORPUS / folder).glob("*.json")):
            for i, interaction in enumerate(json.loads(path.read_text()).get("interactions", [])):
                tools = _tool_names(interaction["request"].get("body"))
                for part in ("request", "response"):
                    body = interaction[part].get("body")
                    source = f"{folder}/{path.name}#{i}.{part}"
                    if isinstance(body, str):
                        events = _stream_events(body)
                        texts = [*_strings(events), *_stream_texts(events)]
                    else:
                        texts = list(_strings(body))
                    for text in texts:
                        yield source, tools, text
    for folder in ("vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat", "vercel_ai_openai_responses"):
        for path in sorted((CORPUS / folder).iterdir()):
            source = f"{folder}/{path.name}"
            if path.suffix == ".json":
                for text in _strings(json.loads(path.read_text())):
                    yield source, set(), text
            elif path.suffix == ".txt":
                events = _stream_events(path.read_text())
                for text in [*_strings(events), *_stream_texts(events)]:
                    yield source, set(), text
    for i, item in enumerate(json.loads((CORPUS / "tau_bench_gpt4o_airline" / "gpt-4o-airline.json").read_text())):
        for text in _strings(item):
            yield f"tau_bench#{i}", set(), text
    for path in sorted((CORPUS / "claude_code_spotter_sessions").rglob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                for text in _strings(json.loads(line)):
                    yield f"{path.relative_to(CORPUS)}:{n}", set(), text


# What the survey flags, each looked at by hand. The only flattened calls in the corpus: an Anthropic
# advisor sub-model wrote `<function_calls><invoke name="advisor">` twice into its advice text (inside an
# advisor_tool_result, streamed), so the text names a call that was never made. Seen twice: once in the
# chunk that carries it whole, once in the re-joined stream.
SURVEY_FLAGS = {"xml_invoke": 4}
SURVEY_REAL = {("vercel_ai_anthropic/anthropic-advisor-20250301.1.chunks.txt", "xml_invoke", "advisor"): 4}


@pytest.mark.slow
def test_corpus_survey_flags_only_the_real_flattened_calls(corpus):
    families: Counter[str] = Counter()
    flagged: Counter[tuple[str, str, str | None]] = Counter()
    texts = 0
    for source, tools, text in corpus_texts():
        texts += 1
        for f in find_flattened(text, tools):
            families[f.family] += 1
            flagged[(source, f.family, f.name)] += 1
    assert texts > 100_000  # every string was read
    assert dict(flagged) == SURVEY_REAL
    assert dict(families) == SURVEY_FLAGS


@pytest.mark.slow
def test_no_flattened_call_in_the_corpus_assistant_turns(corpus):
    """Through the reading path, the codecs and the rule: no assistant text in the corpus holds a flattened
    call (the advisor's lives inside a hosted tool result, which is not this conversation's model output)."""
    from corpus import tau_bench_trajectories
    from pipeline.ingest import expand_paths, iter_parsed
    folders = [*CASSETTE_FOLDERS, "vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat",
               "vercel_ai_openai_responses", "claude_code_spotter_sessions"]
    convs = [item.conversation for item in iter_parsed(expand_paths([str(corpus / f) for f in folders]))
             if item.conversation is not None]
    convs += [formats.parse(traj, "openai-chat") for _, traj in tau_bench_trajectories()]
    only = ValidateConfig({code: "off" for code in RULES if code != "flattened_tool_call"})
    texts = sum(isinstance(b, Text) for c in convs for m in c.messages if m.role == "assistant" for b in m.blocks)
    assert len(convs) > 600 and texts > 1500
    assert [i for c in convs for i in validate(c, only)] == []
