"""Anthropic Messages API: request bodies, bare message lists and response objects; one module per
step (`detection`, `parser`, `serializer`), blocks and messages read in `reader` and written in `writer`."""

from .blocks import NAME
from .detection import detect
from .parser import parse
from .serializer import DEFAULT_MAX_TOKENS, serialize

__all__ = ["DEFAULT_MAX_TOKENS", "NAME", "detect", "parse", "serialize"]
