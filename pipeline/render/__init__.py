"""Chat templates -> text, token ids, a checked loss mask and spans; parse-back; tokenizer loading.

    tok = load_tokenizer("qwen2.5")
    tpl = load_template("chatml")
    out = render(conv, tpl, tok, mask=MaskPolicy(turns="last"))
    check_roundtrip(conv, out, tpl, tok)   # the token stream parses back to `conv`, up to out.ledger

Built-in template families live in FAMILIES (registry.py; adding a template touches its module, its file
under templates/ and one line there). A user template is a .jinja file path, or "tokenizer" for the
chat template that came with the tokenizer; it runs in the same sandbox.
"""

from __future__ import annotations

from ._roundtrip import project
from .builtin_tokenizers import BUILTIN_TOKENIZERS
from .registry import FAMILIES, check_fit, check_roundtrip, load_template, parse_back, render, tokenizer_for
from .rendered import DEFAULT_NOW, MaskPolicy, RenderOptions, Rendered, Span, mask_view, to_json
from .segments import SegmentEncoder
from .templates import CUSTOM, Family, Template, make_environment
from .tokenizers import Tokenizer, load_tokenizer

__all__ = ["BUILTIN_TOKENIZERS", "CUSTOM", "DEFAULT_NOW", "FAMILIES", "Family", "MaskPolicy", "RenderOptions", "Rendered",
           "SegmentEncoder", "Span", "Template", "Tokenizer", "check_fit", "check_roundtrip", "load_template",
           "load_tokenizer", "make_environment", "mask_view", "parse_back", "project", "render", "to_json",
           "tokenizer_for"]
