"""The render stage of a run: template + tokenizer, token limits, trimming in whole units, the row."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
from msgspec import structs
from msgspec.structs import replace

from .. import jsonpolicy
from ..conversation import Conversation, ToolCall
from ..errors import ConfigError, SftprepError
from .config import RenderConfig, ShapeConfig
from .exports import build as build_exports
from .exports import rendered_chat
from .exports.chat import chat_json
from .item import conversation_json, drop
from .shape_columns import shape_columns
from .window import closed_points


def render_settings(config: RenderConfig):
    """(MaskPolicy, RenderOptions) of a job's [render] section: what `run` and `render --config` share."""
    from ..render import MaskPolicy, RenderOptions

    try:
        now = datetime.fromisoformat(config.date).replace(tzinfo=timezone.utc)
    except ValueError:
        raise ConfigError(f"render.date must be an ISO date like 2026-01-01, got '{config.date}'",
                          code="bad_config") from None
    return MaskPolicy.parse(config.mask), RenderOptions(now=now, calls=config.calls,
                                                        past_reasoning=config.past_reasoning)


class Renderer:
    """Loaded once per worker: the template and tokenizer are the expensive part."""

    def __init__(self, config: RenderConfig, export_formats: list[str] = ()):
        from ..render import check_fit, load_template, load_tokenizer, tokenizer_for
        from ..render.fast_tokenizer import first_engine

        # The fast engine builds from the tokenizer.json while HF tokenizers parses it.
        self.tokenizer = load_tokenizer(tokenizer_for(config.template, config.tokenizer),
                                        engine=first_engine(config.tokenizer_backend))
        self.tokenizer.segment_encoder.limit(config.segment_cache_tokens)
        # What encodes the pieces, and why (a sentence: the run prints it when auto keeps HF).
        self.backend_note = self.tokenizer.segment_encoder.use_backend(config.tokenizer_backend,
                                                                       config.tokenizer_check_every)
        self.template = load_template(config.template, self.tokenizer)
        check_fit(self.template, self.tokenizer)  # before any record: a misfit would reject them all
        self.mask, self.options = render_settings(config)
        self.export_formats = list(export_formats)

    def render(self, conv: Conversation):
        return self.render_buffers(conv)[0]

    def render_buffers(self, conv: Conversation):
        """(Rendered, ids as int32 bytes, mask as int8 bytes, the marked template inputs): what `row`
        takes as `rendered` and `buffers`."""
        from ..render.engine import render_marked

        return render_marked(conv, self.template, self.tokenizer, mask=self.mask, options=self.options)

    def render_item(self, item, shape: ShapeConfig, export=None):
        """Render, apply the token limits (trimming whole units or windowing, as `shape.long` says), and
        build the row (rows, for windows). `export` gives a window its own [convert] body."""
        conv = item.conversation
        rendered, *buffers = self.render_buffers(conv)
        if shape.max_tokens and len(rendered.input_ids) > shape.max_tokens:
            if shape.long == "drop":
                return drop(item, "render", "too_long", f"{len(rendered.input_ids)} tokens > max_tokens")
            if shape.long == "window":
                from .window_rows import window_item

                return window_item(self, item, shape, export)
            trimmed = self._trim(conv, shape.max_tokens)
            if trimmed is None:
                return drop(item, "render", "too_long_untrimmable",
                            f"no whole-unit prefix fits in {shape.max_tokens} tokens")
            conv, (rendered, *buffers) = trimmed
            item.conversation, item.trimmed = conv, True
        if len(rendered.input_ids) < shape.min_tokens:
            return drop(item, "render", "too_short", f"{len(rendered.input_ids)} tokens < min_tokens")
        if not any(rendered.loss_mask):
            return drop(item, "render", "nothing_trained", "no token is trained under the mask policy")
        if self.options.past_reasoning == "expand":
            return self._expanded(item, conv, shape)
        item.ledger.extend(rendered.ledger)
        item.rendered = self.row(item, conv, rendered, buffers)
        return item

    def _expanded(self, item, conv: Conversation, shape: ShapeConfig):
        """past_reasoning="expand": the item's rows (the first in `rendered`, the rest in `extra_rows`),
        each saying which case applied. A row over max_tokens filters the whole item (no row is cut)."""
        from ..render.expand import expand

        rows = [r for r in expand(conv, self.template, self.tokenizer, mask=self.mask, options=self.options)
                if any(r.rendered.loss_mask)]
        if not rows:
            return drop(item, "render", "nothing_trained", "no token is trained under the mask policy")
        longest = max(len(r.rendered.input_ids) for r in rows)
        if shape.max_tokens and longest > shape.max_tokens:
            return drop(item, "render", "too_long", f"an expanded row has {longest} tokens > max_tokens")
        base_ledger = list(item.ledger)
        out = []
        for k, r in enumerate(rows):
            item.ledger = base_ledger + list(r.rendered.ledger)
            row = self.row(item, structs.replace(conv, messages=conv.messages[:r.messages]), r.rendered,
                           list(r.buffers))
            row["reasoning_row"] = _json({"case": r.case, "row": k, "rows": len(rows), "messages": r.messages,
                                          "trained": list(r.trained)})
            if r.case == "prefix":
                row["id"] = f"{item.digest}/{r.messages}"
            out.append(row)
            item.tallies.append(("past_reasoning", r.case))
        item.rendered, item.extra_rows = out[0], out[1:]
        return item

    def _trim(self, conv: Conversation, limit: int):
        """The longest prefix that ends on an assistant turn, holds every result of every call it holds,
        and fits: binary search over those cut points (token count grows with the prefix)."""
        cuts = cut_points(conv)
        best = None
        lo, hi = 0, len(cuts) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            prefix = replace(conv, messages=conv.messages[: cuts[mid]])
            try:
                result = self.render_buffers(prefix)
            except SftprepError:
                hi = mid - 1
                continue
            if len(result[0].input_ids) <= limit:
                best, lo = (prefix, result), mid + 1
            else:
                hi = mid - 1
        return best

    def row(self, item, conv: Conversation, rendered, buffers: list | None = None, *,
            window: tuple[int, int] = (0, 1), row_id: str | None = None, export: Any = None) -> dict[str, Any]:
        """The row; a window of a long conversation gives (index, count), its own id and export.
        `buffers`: the render's [ids, mask] bytes, and its MarkedInputs third when it has them.
        JSON columns are UTF-8 bytes (role_tokens a str): the writers take either."""
        # Token columns as numpy arrays (from the render's buffers when given): built in bulk, pickled
        # to the parent as buffers, turned into Arrow columns without a Python object per token.
        if buffers:
            ids = np.frombuffer(buffers[0], dtype="<i4")
            mask = np.frombuffer(buffers[1], dtype=np.int8)
        else:
            ids = np.array(rendered.input_ids, dtype=np.int32)
            mask = np.array(rendered.loss_mask, dtype=np.int8)
        marked = buffers[2] if buffers and len(buffers) > 2 else None
        conversation = conversation_json(conv)
        # Exports read the chat itself; without them, its two columns come straight from the inputs.
        columns = None if self.export_formats else chat_json(conv, conversation, self, marked)
        exports = None
        if columns is None:
            chat = rendered_chat(conv, self, rendered, buffers[1] if buffers else None, marked)
            exports = build_exports(chat, self.export_formats, item.ledger) if self.export_formats else None
            columns = _json(chat.messages), _json(chat.tools)
        ledger = item.ledger
        row = {
            "id": row_id or item.digest,
            "source": item.source,
            "source_format": conv.meta.provider,
            "shape": conv.meta.shape,
            "template": rendered.template,
            "tokenizer": rendered.tokenizer,
            "input_ids": ids,
            # labels (ids, -100 where masked) are derived by the writer: a quarter less to ship
            "loss_mask": mask,
            "num_tokens": len(ids),
            "num_trained_tokens": int(np.count_nonzero(mask)),
            "num_messages": len(conv.messages),
            "num_tool_calls": sum([isinstance(b, ToolCall) for message in conv.messages for b in message.blocks]),
            "trimmed": item.trimmed,
            "messages": columns[0],
            "tools": columns[1],
            "conversation": conversation,
            "issues": _json([_issue(i) for i in item.issues]),
            "ledger": _json([_ledger_row(e) for e in ledger]),
            "export": _json(export) if export is not None else (_json(item.export) if item.export is not None
                                                                 else None),
            "reasoning_row": None,  # JSON under past_reasoning="expand": which case made this row
            **shape_columns(item, rendered, conv, window),
        }
        if exports is not None:
            row["exports"] = exports  # the parent writes them to the export files, not the row
        return row


def cut_points(conv: Conversation) -> list[int]:
    """Message counts k such that messages[:k] ends on an assistant turn and no call in it waits for
    a result outside it: trimming there never separates a call from its result."""
    return [k for k, message, closed in closed_points(conv) if closed and message.role == "assistant"]


def _issue(issue) -> dict[str, Any]:
    out = {"code": issue.code, "severity": issue.severity, "path": issue.path, "message": issue.message}
    if issue.span is not None:  # a flattened call: where in the block's text (the QA report shows it)
        out["span"], out["family"] = list(issue.span), issue.family
    return out


def _json(value: Any) -> bytes:
    # UTF-8 as the encoder wrote it (orjson refuses lone surrogates, so it is always valid): the row
    # ships it to the parent and the writer stores it without a decode here and an encode there.
    return jsonpolicy.dumps(value)


def _ledger_row(entry) -> dict:
    row = {"kind": entry.kind, "path": entry.path, "reason": entry.reason, "target": entry.target}
    if entry.detector is not None:
        row["detector"] = entry.detector
    return row
