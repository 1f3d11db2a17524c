"""OpenAI Responses API: request bodies (`input` + `instructions` + `tools`), bare input-item lists, and
response objects (`object: "response"`, also the `response.compaction` object of /responses/compact).

The item layer (grouping items into messages, parts, calls, reasoning) is `reader` and `writer`; the
body around the items (instructions, tools, request parameters, the three shapes) is `parser` and
`serializer`.
"""

from .detection import detect
from .items import NAME
from .parser import parse
from .serializer import serialize

__all__ = ["NAME", "detect", "parse", "serialize"]
