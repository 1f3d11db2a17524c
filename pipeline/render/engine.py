"""The render core: a canonical Conversation, a chat template and a tokenizer in; text, token ids, a
checked per-token loss mask and spans out.

How: the conversation becomes the template's inputs with sentinel characters around every block
(`_inputs`, `marks`); the template runs in a sandboxed Jinja environment configured as transformers
configures it (`templates`), its `{% generation %}` regions wrapped in two more sentinels; stripping the
sentinels gives the text and the character span of every block and generation region. The text is split
at added tokens and each piece tokenized on its own (`segments`: identical ids to the whole text, and
repeated pieces are cached); character spans become token spans through per-piece offsets (`spans`), so
nothing loops over tokens in Python.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from ..conversation import Conversation
from ..errors import ConfigError, RenderError
from ..ledger import Ledger
from .derived import derived_regions
from .marks import MARK_RE, Marks, _ordered_blocks, _strip
from .rendered import MaskPolicy, RenderOptions, Rendered
from .spans import _boundaries, _check_mask, _mask, _regions, _spans, _trained_messages
from ._inputs import TemplateInputs
from .templates import Family, Template
from .tokenizers import Tokenizer


class MarkedInputs(NamedTuple):
    """The template inputs a render was given, sentinels included, and the marks they hold: the row's
    messages export is these stripped, so it need not build them again."""

    inputs: TemplateInputs
    marks: Marks


def render(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
           options: RenderOptions = RenderOptions()) -> Rendered:
    """Render one conversation. Raises RenderError (with the block's path) when the template cannot
    carry it faithfully or the mask checks fail; ledger entries record declared losses."""
    return render_buffers(conv, template, tokenizer, mask=mask, options=options)[0]


def render_buffers(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
                   options: RenderOptions = RenderOptions()) -> tuple[Rendered, bytes, bytes]:
    """`render`, plus its ids as little-endian int32 and its mask as int8 bytes: what a writer stores,
    without a Python int per token."""
    return render_marked(conv, template, tokenizer, mask=mask, options=options)[:3]


def render_marked(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
                  options: RenderOptions = RenderOptions()) -> tuple[Rendered, bytes, bytes, MarkedInputs]:
    """`render_buffers`, plus the marked template inputs it rendered."""
    family = template.family
    check_fit(template, tokenizer)
    ledger = Ledger(template.name, strict=options.strict)
    user = not template.builtin
    marks = Marks(edges_outside=user)
    inputs = family.inputs(conv, marks, ledger, options)
    raw = template.render_raw(inputs, tokenizer, options)
    verify = options.verify_marks if options.verify_marks is not None else user
    plain_inputs = None
    if verify or user:
        plain_inputs = family.inputs(conv, Marks(enabled=False), Ledger(template.name), options)
    if verify:
        plain = template.render_raw(plain_inputs, tokenizer, options)
        if MARK_RE.sub("", plain) != MARK_RE.sub("", raw):
            raise RenderError(f"template '{template.name}' renders differently once blocks are marked (it inspects "
                              "message content), so spans cannot be located", code="render_marking")
    text, found = _strip(raw, marks.refs, lenient=user, repeatable=marks.repeatable)
    for path in dict.fromkeys(ref.path for ref in found.dropped):  # a user template's own losses
        ledger.add("dropped", path, f"template '{template.name}' does not render this")
    blocks = _ordered_blocks(found)
    encoder = tokenizer.segment_encoder
    pieces, piece_texts = encoder.split_texts(text)
    # Only what the conversation wrote: between a call's name and its arguments is template text.
    _check_added_tokens_in_content(pieces, sorted(found.pieces, key=lambda p: (p[0], p[1])), tokenizer)
    seg = encoder.encode(text, pieces, piece_texts)
    eot_ids = {tid for tid in (tokenizer.token_id(t) for t in _eot_tokens(family, tokenizer)) if tid is not None}
    if user and not found.regions:  # no generation markers: what the model writes, found by rendering
        regions = derived_regions(template, plain_inputs, tokenizer, options, text, found, blocks, pieces, conv)
    else:
        regions = _regions(found, blocks, pieces, eot_ids, conv)
    seg.index(_boundaries(text, blocks, found, regions))
    spans = _spans(text, blocks, regions, seg)
    trained = _trained_messages(conv, regions, mask, blocks)
    loss_mask = _mask(regions, blocks, trained, mask, seg)
    if options.check:
        _check_mask(loss_mask, blocks, regions, trained, mask, seg, spans)
    rendered = Rendered(template=template.name, tokenizer=tokenizer.name, text=text, input_ids=seg.ids,
                        loss_mask=list(loss_mask), spans=tuple(spans), ledger=tuple(ledger.entries))
    return rendered, seg.buffer, bytes(loss_mask), MarkedInputs(inputs, marks)


def check_fit(template: Template, tokenizer: Tokenizer) -> None:
    """A built-in family needs its special tokens in the tokenizer; a misfit is a usage error."""
    missing = [t for t in template.family.required_tokens if t not in tokenizer.added_tokens]
    if missing:
        raise ConfigError(f"tokenizer '{tokenizer.name}' lacks {', '.join(missing)}, which template "
                          f"'{template.name}' needs", code="tokenizer_mismatch")


def _eot_tokens(family: Family, tokenizer: Tokenizer) -> tuple[str, ...]:
    if family.eot_tokens:
        return family.eot_tokens
    return (tokenizer.eos_token,) if tokenizer.eos_token else ()


def _check_added_tokens_in_content(pieces, blocks, tokenizer: Tokenizer) -> None:
    """Text that spells a special token would be tokenized as template structure: a user turn could
    close itself, a text could become a tool call. Refuse it, naming the block."""
    if not blocks:
        return
    starts = [b[0] for b in blocks]
    for start, end, token in pieces:
        if token is None:
            continue
        i = bisect_right(starts, start) - 1
        if i >= 0 and start < blocks[i][1]:
            content = tokenizer.backend.id_to_token(token)
            raise RenderError(f"content spells the special token {content}, which would be read as template "
                              "structure", path=blocks[i][2].path, code="render_special_token")
