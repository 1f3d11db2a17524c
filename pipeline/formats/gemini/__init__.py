"""Gemini generateContent (Gemini API and Vertex): request bodies, bare `contents` lists and response
objects; parts read in `reader` and written in `writer`, tools and request parameters in `tools`."""

from .detection import detect
from .parser import parse
from .parts import NAME
from .serializer import serialize
from .tools import form_losses

__all__ = ["NAME", "detect", "form_losses", "parse", "serialize"]
