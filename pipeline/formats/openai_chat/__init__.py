"""OpenAI Chat Completions: request bodies, bare message lists and `chat.completion` response objects.

Layout hints that the canonical fields cannot express (content was a string or a list or null, a key
was present with null, the order of leading instruction messages) go to `form["openai-chat"]`, only
when they differ from what the serializer writes by default. Data without a canonical field goes to
`extras["openai-chat"]`; keys starting with `$` there are this codec's own containers (`$response`,
`$choice`, `$function`...), never wire keys of the same object.
"""

from .blocks import NAME
from .detection import detect
from .parser import parse
from .serializer import serialize
from .writer import MAX_ID_LEN

__all__ = ["MAX_ID_LEN", "NAME", "detect", "parse", "serialize"]
