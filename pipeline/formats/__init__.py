"""Provider wire formats: one codec subpackage each (parse, serialize, detect), the registry that
picks one by name or by detection, and conversion of whole inputs."""

from .base import SHAPES, Detection
from .registry import ALIASES, FORMATS, TIE_ORDER, detect, get, is_message, parse, serialize

__all__ = ["ALIASES", "FORMATS", "SHAPES", "TIE_ORDER", "Detection", "detect", "get", "is_message", "parse", "serialize"]
