"""The built-in template families by name, and the entry points that take a family, template or
tokenizer by name: load_template, render, parse_back, check_roundtrip. Adding a family is one line of
FAMILIES."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

from ..conversation import Conversation
from ..errors import ConfigError
from . import chatml, harmony, llama3, mistral, qwen3
from ._roundtrip import check_parse_back
from .engine import check_fit
from .engine import render as _render
from .rendered import MaskPolicy, RenderOptions, Rendered
from .templates import Family, Template
from .tokenizers import Tokenizer, load_tokenizer

FAMILIES: dict[str, Family] = {
    "chatml": chatml.FAMILY,
    "qwen3": qwen3.FAMILY,
    "llama3": llama3.FAMILY,
    "harmony": harmony.FAMILY,
    "harmony-jinja": harmony.JINJA_FAMILY,
    "mistral": mistral.FAMILY,
}

_templates: dict[str, Template] = {}
_lock = threading.Lock()


def load_template(name_or_path: str | os.PathLike | Template, tokenizer: Tokenizer | None = None) -> Template:
    """A built-in family name, a .jinja file, or "tokenizer" (the tokenizer's own chat template).
    Built-ins are compiled once per process."""
    if isinstance(name_or_path, Template):
        return name_or_path
    key = str(name_or_path)
    if key in FAMILIES:
        with _lock:
            if key not in _templates:
                _templates[key] = Template.from_family(FAMILIES[key])
            return _templates[key]
    if key == "tokenizer":
        if tokenizer is None or tokenizer.chat_template is None:
            raise ConfigError("template 'tokenizer' needs a tokenizer that ships a chat template "
                              f"(valid built-ins: {', '.join(FAMILIES)})", code="unknown_template")
        return Template.compile(f"{tokenizer.name}:chat_template", tokenizer.chat_template)
    path = Path(key).expanduser()
    if path.is_file():
        return Template.compile(str(path), path.read_text(encoding="utf-8"))
    raise ConfigError(f"unknown template '{key}'; valid: {', '.join(FAMILIES)}, a .jinja file, or 'tokenizer'",
                      code="unknown_template")


def tokenizer_for(template: str, tokenizer: str | None) -> str:
    """The tokenizer a template renders with: the one named, else a built-in family's own. A template
    that is not a family (a .jinja file, `tokenizer`) needs one named."""
    if tokenizer:
        return tokenizer
    key = str(template)
    family = FAMILIES.get(key)
    if family is not None and family.default_tokenizer:
        return family.default_tokenizer
    if family is None and key != "tokenizer" and not Path(key).expanduser().is_file():
        load_template(key)  # raises: unknown template, listing the valid ones
    raise ConfigError(f"template '{key}' has no tokenizer of its own: name its tokenizer with --tokenizer "
                      f"(render.tokenizer in a job); built-in families have one: {', '.join(FAMILIES)}",
                      code="no_tokenizer")


def render(conv: Conversation, template: str | os.PathLike | Template, tokenizer: str | Tokenizer, *,
           mask: MaskPolicy = MaskPolicy(), options: RenderOptions = RenderOptions()) -> Rendered:
    """Render `conv` with a template (name, path or Template) and a tokenizer (name, path or Tokenizer)."""
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    return _render(conv, load_template(template, tok), tok, mask=mask, options=options)


def _family(family: str | Family | Template) -> Family:
    if isinstance(family, Template):
        family = family.family
    if isinstance(family, Family):
        return family
    try:
        return FAMILIES[family]
    except KeyError:
        raise ConfigError(f"unknown template family '{family}'; valid: {', '.join(FAMILIES)}",
                          code="unknown_template") from None


def parse_back(ids_or_text: str | Sequence[int], family: str | Family | Template,
               tokenizer: Tokenizer | str | None = None) -> Conversation:
    """The conversation a rendered token stream (ids, which need the tokenizer) or text holds."""
    fam = _family(family)
    if fam.parse_back is None:
        raise ConfigError(f"template family '{fam.name}' has no parse-back (only built-ins do: {', '.join(FAMILIES)})",
                          code="no_parse_back")
    if isinstance(ids_or_text, str):
        text = ids_or_text
    else:
        if tokenizer is None:
            raise ConfigError("parse_back from token ids needs the tokenizer", code="no_tokenizer")
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
        text = tok.decode(ids_or_text)
    return fam.parse_back(text)


def check_roundtrip(conv: Conversation, rendered: Rendered, template: str | Family | Template,
                    tokenizer: Tokenizer | str) -> Conversation:
    """Parse `rendered.input_ids` back and require it to equal `conv` up to `rendered.ledger` (see
    `_roundtrip` for the exact comparison). Returns the parsed conversation; raises RenderError."""
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    parsed = parse_back(rendered.input_ids, template, tok)
    normalizer = tok.backend.normalizer
    normalize = normalizer.normalize_str if normalizer is not None else (lambda s: s)
    fam = _family(template)
    if fam.expected is not None:  # the family restructured turns: compare with what it rendered
        check_parse_back(fam.expected(conv, rendered.ledger), parsed, (), normalize, fam.policy.text_joiner)
    else:
        check_parse_back(conv, parsed, rendered.ledger, normalize, fam.policy.text_joiner)
    return parsed


