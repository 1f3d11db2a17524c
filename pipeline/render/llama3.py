"""Llama 3.1 / 3.3 Instruct (JSON tool calling): the family's facts and its conversion (the parser from its
token stream back to a canonical Conversation is `_llama3_parse`).

The format (what `templates/llama3.jinja` writes; H(r) = <|start_header_id|>r<|end_header_id|>\\n\\n):
    <|begin_of_text|>H(system)[Environment: ipython\\n]Cutting Knowledge Date: December 2023\\n
        Today Date: 26 Jul 2024\\n\\nSYSTEM<|eot_id|>
    [H(user)Given the following functions, ...Do not use variables.\\n\\nTOOL_JSON\\n\\n...FIRST_USER<|eot_id|>]
    H(user)TEXT<|eot_id|>
    H(assistant)TEXT<|eot_id|>            or    H(assistant){"name": "N", "parameters": ARGS}<|eot_id|>
    H(ipython)JSON_RESULT<|eot_id|>       (a text result as a JSON string, a structured one as the object)

What the official template loses, and what this family does instead (never silently):
- One call per assistant turn and no text beside it. RenderOptions.calls picks the policy (ledgered):
  `split` (default): the turn becomes consecutive assistant turns in block order, each run of text one
  turn and each call one turn, and the results of every call but a last-piece call move right after
  it: blocks [T1, C1, T2, C2, T3] with results R1, R2 render as T1 | C1 | R1 | T2 | C2 | R2 | T3 (a
  last-piece call's results stay where they were). Nothing is lost and every result follows its call,
  which is why it is the default. Caveat: a text turn followed by a call turn teaches the model to
  end a turn after the text; pick `drop-text` for data shaped like what Llama 3.x itself writes.
  `drop-text`: text beside a call is dropped, as the official template does (an entry per block);
  several calls are still split. `refuse`: RenderError naming the block.
- Message text is trimmed, as the official template trims it: an entry per trimmed block.
- Tool results: the official template `tojson`s them, so a text result renders as a JSON string
  (quoted, escaped) and an object once. Conformance here means those official bytes: the quoting is
  reversible (parse-back decodes it), and it is what a model served through that template sees.
  A structured output that is an object renders as the object; any other (a list) as JSON text, quoted.
- With tools in the first user message, a conversation that opens with another role gets an empty user
  turn to carry them (ledgered "synthesized"); the official template would relabel that message.
Results carry no call id: a result answers the call of the assistant turn before it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable, NamedTuple, assert_never

from msgspec import structs

from ..conversation import Block, Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import ConfigError, RenderError
from ..ledger import Ledger, LedgerEntry, LedgerKind
from ._inputs import InputPolicy, TemplateInputs, block_path, build_inputs
from ._llama3_parse import BOS, EOT, _parse_call, parse_back
from ._roundtrip import dropped_paths
from .marks import BlockRef, Marks
from .rendered import RenderOptions
from .templates import Family

CALL_POLICIES = ("split", "drop-text", "refuse")


@dataclass(frozen=True)
class LlamaPolicy(InputPolicy):
    calls: str = "split"  # one of CALL_POLICIES, from RenderOptions.calls
    tools_in_user: bool = True  # the template's `tools_in_user_message` (RenderOptions.template_kwargs)


POLICY = LlamaPolicy(target="llama3", reasoning="drop", developer="system", text_joiner="\n",
                     bad_name=re.compile(r'["\\\x00-\x1f]'), structured_results=True)


def configure(policy: InputPolicy, options: RenderOptions) -> InputPolicy:
    if options.calls not in CALL_POLICIES:
        raise ConfigError(f"unknown calls policy '{options.calls}'; valid: {', '.join(CALL_POLICIES)}",
                          code="unknown_calls_policy")
    return dataclasses.replace(policy, calls=options.calls,
                               tools_in_user=bool(options.template_kwargs.get("tools_in_user_message", True)))


# --- restructuring: one call per turn, trimmed text -------------------------------------------------

class _Turn(NamedTuple):
    """A message of the prepared conversation: its original message and index, and the blocks it keeps
    as (original block index, block)."""

    message: Message
    index: int
    blocks: list[tuple[int, Block]]


class _Prepared(NamedTuple):
    conv: Conversation
    # per message of `conv`: (index of the original message, original index of each of its blocks)
    origin: list[tuple[int, tuple[int, ...]]]


def _text_of(block: Block) -> str | None:
    return block.text if isinstance(block, (Text, Media)) else None


def _unit(block: Block) -> str | None:
    """What a block is in an assistant turn: "text" (non-blank text), "call" (a call the template writes),
    or None: blank text and what the conversion drops (reasoning, hosted calls, media, opaque items)."""
    match block:
        case Text() | Media():
            text = _text_of(block)
            return "text" if text is not None and text.strip() else None
        case ToolCall():
            return None if block.kind == "hosted" else "call"
        case Reasoning() | Opaque() | ToolResult():
            return None
        case _:
            assert_never(block)


def _carries_nothing(blocks: list[tuple[int, Block]]) -> bool:
    """An assistant message the conversion drops whole (only reasoning, hosted calls, media...)."""
    return bool(blocks) and not any(isinstance(b, Text) or (isinstance(b, Media) and b.text is not None)
                                    or (isinstance(b, ToolCall) and b.kind != "hosted") for _, b in blocks)


def _pieces(blocks: list[tuple[int, Block]]) -> list[list[tuple[int, Block]]]:
    """An assistant turn cut into turns Llama 3.x can write: each call alone, each run of other blocks
    together; a run without text joins the next piece (or the previous one, at the end)."""
    runs: list[list[tuple[int, Block]]] = []
    for item in blocks:
        if _unit(item[1]) == "call" or not runs or _unit(runs[-1][-1][1]) == "call":
            runs.append([item])
        else:
            runs[-1].append(item)
    pieces: list[list[tuple[int, Block]]] = []
    pending: list[tuple[int, Block]] = []
    for run in runs:
        if any(_unit(b) is not None for _, b in run):
            pieces.append(pending + run)
            pending = []
        else:
            pending += run
    if pending:
        if pieces:
            pieces[-1] += pending
        else:
            pieces.append(pending)
    return pieces


Note = Callable[[LedgerKind, str, str], None]


def prepare(conv: Conversation, calls: str, ledger: Ledger | None, drop: set[str] | None = None) -> _Prepared:
    """The conversation as Llama 3.x turns can hold it: turns split (or text dropped, or a refusal) by
    the `calls` policy, text trimmed; `ledger` gets an entry per change, at the original paths. With
    `drop` (for the parse-back comparison), those paths are left out first, and so are empty
    instructions (the stream cannot tell them from none)."""
    parse_back_view = drop is not None
    drop = drop or set()

    def note(kind: LedgerKind, path: str, reason: str) -> None:
        if ledger is not None:
            ledger.add(kind, path, reason)

    turns = [_Turn(message, mi, [(bi, b) for bi, b in enumerate(message.blocks) if block_path(mi, bi) not in drop])
             for mi, message in enumerate(conv.messages) if f"$.messages[{mi}]" not in drop]
    new_messages, origin = [], []
    for message, mi, blocks in _restructure(turns, calls, note):
        blocks = _trim_message(message.role, mi, blocks, note)
        if message.role == "assistant":
            _refuse_call_shaped_text(mi, blocks)
        new_messages.append(structs.replace(message, blocks=tuple(b for _, b in blocks)))
        origin.append((mi, tuple(bi for bi, _ in blocks)))
    system, developer = _trim_instructions(conv, note, drop, parse_back_view)
    prepared = structs.replace(conv, messages=tuple(new_messages), system=system, developer=developer)
    if parse_back_view:
        prepared = structs.replace(prepared, tools=tuple(t for ti, t in enumerate(conv.tools)
                                                         if f"$.tools[{ti}]" not in drop))
    return _Prepared(prepared, origin)


def _restructure(turns: list[_Turn], calls: str, note: Note) -> list[_Turn]:
    out: list[_Turn] = []
    k = 0
    while k < len(turns):
        turn = turns[k]
        k += 1
        if turn.message.role != "assistant":
            out.append(turn)
            continue
        mi, blocks = turn.index, turn.blocks
        texts = [bi for bi, b in blocks if _unit(b) == "text"]
        if texts and calls == "drop-text" and any(_unit(b) == "call" for _, b in blocks):
            for bi in texts:
                note("dropped", block_path(mi, bi), "text beside a tool call dropped, as the official Llama 3.x "
                                                    "template does (calls=drop-text)")
            blocks = [(bi, b) for bi, b in blocks if bi not in texts]
        pieces = _pieces(blocks)
        if len(pieces) < 2:
            out.append(turn._replace(blocks=blocks))
            continue
        if calls == "refuse":
            _refuse(mi, blocks)
        note("moved", f"$.messages[{mi}]", f"assistant turn rendered as {len(pieces)} consecutive turns in block "
                                           "order, each call in its own turn (calls=split)")
        # The results that answer this turn: up to the next assistant message the conversion keeps.
        end = k
        while end < len(turns) and (turns[end].message.role != "assistant" or _carries_nothing(turns[end].blocks)):
            end += 1
        out += _split(turn.message, mi, pieces, turns[k:end], note)
        k = end
    return out


def _refuse(mi: int, blocks: list[tuple[int, Block]]) -> None:
    calls = [bi for bi, b in blocks if _unit(b) == "call"]
    texts = [bi for bi, b in blocks if _unit(b) == "text"]
    what, at = ("text beside a tool call", texts[0]) if texts else ("a second tool call in one turn", calls[1])
    raise RenderError(f"{what}: Llama 3.x renders one call per assistant turn and no text beside it (calls=refuse; "
                      f"the call is at {block_path(mi, calls[0])})", path=block_path(mi, at),
                      code="render_unsupported_turn")


def _split(message: Message, mi: int, pieces: list[list[tuple[int, Block]]], zone: list[_Turn],
           note: Note) -> list[_Turn]:
    """One turn per piece; the results of a call that is not the last piece move right after it (each
    in a message of its own), the rest of the zone follows in its order."""
    movable = {b.id: p for p, piece in enumerate(pieces[:-1]) for _, b in piece
               if isinstance(b, ToolCall) and _unit(b) == "call"}
    moved: list[list[_Turn]] = [[] for _ in pieces]
    rest: list[_Turn] = []
    for turn in zone:
        kept = []
        for bi, b in turn.blocks:
            if isinstance(b, ToolResult) and b.call_id in movable:
                moved[movable[b.call_id]].append(_Turn(turn.message, turn.index, [(bi, b)]))
                note("moved", block_path(turn.index, bi), "result rendered right after the call it answers "
                                                          "(calls=split)")
            else:
                kept.append((bi, b))
        if kept or not turn.blocks:
            rest.append(turn._replace(blocks=kept))
    out: list[_Turn] = []
    for piece, results in zip(pieces, moved):
        out.append(_Turn(message, mi, piece))
        out += results
    return out + rest


_TRIMMED = "surrounding whitespace trimmed (Llama 3.x templates trim message text)"


def _trim_run(run: list[tuple[int, Block]], path_of: Callable[[int], str], note: Note) -> dict[int, Block]:
    """Strip whitespace from the start of a run of text blocks (joined by newlines) and from its end,
    block by block, as trimming the joined text would. Returns the changed blocks by position."""
    texts = {i: _text_of(b) for i, (_, b) in enumerate(run) if _text_of(b) is not None}
    order = list(texts)
    new = dict(texts)
    for i in order:
        new[i] = new[i].lstrip()
        if new[i]:
            break
    for i in reversed(order):
        new[i] = new[i].rstrip()
        if new[i]:
            break
    changed = {}
    for i in order:
        if new[i] != texts[i]:
            bi, block = run[i]
            note("dropped", path_of(bi) + ".text", _TRIMMED)
            changed[i] = structs.replace(block, text=new[i])
    return changed


def _trim_message(role: str, mi: int, blocks: list[tuple[int, Block]], note: Note) -> list[tuple[int, Block]]:
    # One rendered turn per run of text: the whole turn for an assistant, runs between results otherwise.
    out = list(blocks)
    start = 0
    for end in range(len(out) + 1):
        if end == len(out) or (role != "assistant" and isinstance(out[end][1], ToolResult)):
            run = out[start:end]
            for i, block in _trim_run(run, lambda bi: block_path(mi, bi), note).items():
                out[start + i] = (run[i][0], block)
            start = end + 1
    return out


def _trim_instructions(conv: Conversation, note: Note, drop: set[str],
                       drop_empty: bool) -> tuple[tuple[Block, ...], tuple[Block, ...]]:
    # System and developer blocks render as one system message: one run of text.
    items = [(f"$.{name}[{bi}]", b) for name, blocks in (("system", conv.system), ("developer", conv.developer))
             for bi, b in enumerate(blocks) if f"$.{name}[{bi}]" not in drop]
    changed = _trim_run(list(enumerate(b for _, b in items)), lambda i: items[i][0], note)
    kept = [(path, changed.get(i, b)) for i, (path, b) in enumerate(items)
            if not drop_empty or _text_of(changed.get(i, b))]  # parse-back reads no system from an empty one
    return (tuple(b for path, b in kept if path.startswith("$.system")),
            tuple(b for path, b in kept if path.startswith("$.developer")))


def _refuse_call_shaped_text(mi: int, blocks: list[tuple[int, Block]]) -> None:
    texts = [(bi, _text_of(b)) for bi, b in blocks if _text_of(b)]
    if texts and _parse_call("\n".join(t for _, t in texts)) is not None:
        raise RenderError("assistant text is a Llama tool call written as JSON: rendered, it would be read as a "
                          "call (a call flattened into text; make it a tool-call block)",
                          path=block_path(mi, texts[0][0]), code="render_flattened_call")


# --- the conversion -----------------------------------------------------------------------------------

_PATH = re.compile(r"^\$\.messages\[(\d+)\](?:\.blocks\[(\d+)\])?")


class _RemapMarks:
    """Marks that name the original message and block of a restructured conversation's block."""

    def __init__(self, marks: Marks, origin: list[tuple[int, tuple[int, ...]]]) -> None:
        self.marks, self.origin = marks, origin
        self.enabled = marks.enabled

    def _ref(self, ref: BlockRef) -> BlockRef:
        if ref.message is None:
            return ref
        mi, blocks = self.origin[ref.message]
        if ref.block is None:
            return BlockRef(ref.kind, mi, None, f"$.messages[{mi}]")
        return BlockRef(ref.kind, mi, blocks[ref.block], block_path(mi, blocks[ref.block]))

    def text(self, value: str, ref: BlockRef, *, anchor: bool = False, repeatable: bool = False) -> str:
        return self.marks.text(value, self._ref(ref), anchor=anchor, repeatable=repeatable)

    def json(self, value: dict, ref: BlockRef) -> dict:
        return self.marks.json(value, self._ref(ref))


class _RemapLedger:
    def __init__(self, ledger: Ledger, origin: list[tuple[int, tuple[int, ...]]]) -> None:
        self.ledger, self.origin = ledger, origin

    def add(self, kind: LedgerKind, path: str, reason: str) -> None:
        self.ledger.add(kind, _PATH.sub(self._sub, path), reason)

    def _sub(self, match: re.Match) -> str:
        mi, blocks = self.origin[int(match.group(1))]
        if match.group(2) is None:
            return f"$.messages[{mi}]"
        return block_path(mi, blocks[int(match.group(2))])


def llama3_inputs(conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> TemplateInputs:
    assert isinstance(policy, LlamaPolicy)
    prepared = prepare(conv, policy.calls, ledger)
    inputs = build_inputs(prepared.conv, _RemapMarks(marks, prepared.origin),  # type: ignore[arg-type]
                          _RemapLedger(ledger, prepared.origin), policy)  # type: ignore[arg-type]
    messages = inputs.messages
    if inputs.tools is not None and policy.tools_in_user:
        first = 1 if messages and messages[0]["role"] == "system" else 0
        if first == len(messages) or messages[first]["role"] != "user":
            ledger.add("synthesized", "$.messages", "an empty user turn carries the tool list (Llama 3.x puts tools "
                                                    "in the first user message; the conversation opens without one)")
            messages = messages[:first] + [{"role": "user", "content": ""}] + messages[first:]
    return TemplateInputs(messages, inputs.tools)


def expected(conv: Conversation, ledger: tuple[LedgerEntry, ...]) -> Conversation:
    """What parse-back must equal: `conv` without what the ledger dropped, restructured as rendered."""
    return prepare(conv, "split", None, dropped_paths(ledger)).conv


CARRIES = (("text beside calls", "split into consecutive turns, dropped or refused (render.calls)"),
           ("parallel calls", "one call per turn: split (render.calls)"), ("reasoning", "dropped (ledgered)"),
           ("call ids", "none: a result answers the call before it"),
           ("tool results", "JSON: text as a JSON string, structured output as the object"),
           ("system", "after the Environment and date header; tools in the first user turn"),
           ("developer", "folded into the system message"), ("media", "dropped; text documents as text"))

FAMILY = Family(name="llama3", policy=POLICY, template_file="llama3.jinja", eot_tokens=(EOT,),
                required_tokens=(BOS, "<|start_header_id|>", "<|end_header_id|>", EOT),
                parse_back=parse_back, build_inputs=llama3_inputs, default_tokenizer="llama3",
                configure=configure, expected=expected, carries=CARRIES)
