"""OpenAI Chat Completions pieces both directions use: field checks, data URLs, content parts (parsed
and written), argument JSON and the default `content` layouts.

Parsing raises only ParseError with the JSON path; writing reports every divergence to the ledger.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ... import jsonpolicy
from ...conversation import Media, Opaque, Reasoning, Text
from ...errors import ParseError
from ...ledger import Ledger

NAME = "openai-chat"

# input_audio `format` <-> media type; other formats are kept as audio/<format>, which inverts exactly.
_AUDIO_MEDIA = {"mp3": "audio/mpeg", "wav": "audio/wav"}
_AUDIO_FORMAT = {v: k for k, v in _AUDIO_MEDIA.items()}
_AUDIO_FORMAT["audio/mp3"] = "mp3"
_AUDIO_FORMAT["audio/x-wav"] = "wav"
OFFICIAL_AUDIO_FORMATS = frozenset(("wav", "mp3"))


def type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def wrong(path: str, what: str, expected: str, value: Any) -> ParseError:
    return ParseError(f"{what} must be {expected}, got {type_name(value)}", path=path)


def missing(path: str, key: str) -> ParseError:
    return ParseError(f"missing required field '{key}'", path=path)


def req_str(obj: dict, key: str, path: str) -> str:
    value = obj.get(key, UNSET)
    if value is UNSET:
        raise missing(path, key)
    if type(value) is not str:
        raise wrong(f"{path}.{key}", f"'{key}'", "a string", value)
    return value


def req_dict(obj: dict, key: str, path: str) -> dict:
    value = obj.get(key, UNSET)
    if value is UNSET:
        raise missing(path, key)
    if type(value) is not dict:
        raise wrong(f"{path}.{key}", f"'{key}'", "an object", value)
    return value


def opt_str(obj: dict, key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and type(value) is not str:
        raise wrong(f"{path}.{key}", f"'{key}'", "a string", value)
    return value


_ITEM_PATHS: dict[str, list[str]] = {}


def item_paths(base: str, count: int) -> list[str]:
    """`base[0]` .. `base[count - 1]`: the paths of an array's items, which each item's parse takes to
    name an error (seldom needed, always passed). Built once per base and reused, when not too many."""
    paths = _ITEM_PATHS.get(base)
    if paths is not None and len(paths) >= count:
        return paths
    paths = [f"{base}[{i}]" for i in range(max(count, 64))]
    if count <= 4096 and (base in _ITEM_PATHS or len(_ITEM_PATHS) < 16):
        _ITEM_PATHS[base] = paths
    return paths


def rest(obj: dict, known: frozenset[str]) -> dict[str, Any]:
    """A new dict of the keys a parser does not model (kept in extras, never the caller's dict)."""
    return {k: v for k, v in obj.items() if k not in known}


# --- data URLs ------------------------------------------------------------------------------------

def split_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of `data:<type>;base64,<data>`; None for anything else, so the
    URL is kept as written. Rebuilding `data:{type};base64,{data}` gives the same string."""
    if not url.startswith("data:"):
        return None
    cut = url.find(";base64,")
    if cut <= 5:
        return None
    return url[5:cut], url[cut + 8:]


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


# --- content parts: parse ------------------------------------------------------------------------

_TEXT_KEYS = frozenset(("type", "text"))
_REFUSAL_KEYS = frozenset(("type", "refusal"))
_IMAGE_KEYS = frozenset(("type", "image_url"))
_IMAGE_URL_KEYS = frozenset(("url", "detail"))
_AUDIO_KEYS = frozenset(("type", "input_audio"))
_INPUT_AUDIO_KEYS = frozenset(("data", "format"))
_FILE_KEYS = frozenset(("type", "file"))
_FILE_FILE_KEYS = frozenset(("file_data", "file_id", "filename"))
_THINKING_KEYS = frozenset(("type", "thinking"))


def parse_part(part: Any, path: str, strict: bool) -> Text | Media | Reasoning | Opaque:
    """One element of a `content` array."""
    if type(part) is not dict:
        raise wrong(path, "a content part", "an object", part)
    kind = part.get("type", UNSET)
    if kind is UNSET:
        raise missing(path, "type")
    if kind == "text":
        text = req_str(part, "text", path)
        if len(part) == 2:
            return Text(text)
        return Text(text, extras={NAME: rest(part, _TEXT_KEYS)})
    if kind == "image_url":
        return _parse_image(part, path)
    if kind == "refusal":
        extras = rest(part, _REFUSAL_KEYS)
        extras["refusal"] = True
        return Text(req_str(part, "refusal", path), extras={NAME: extras})
    if kind == "input_audio":
        inner = req_dict(part, "input_audio", path)
        ipath = f"{path}.input_audio"
        data = req_str(inner, "data", ipath)
        fmt = req_str(inner, "format", ipath)
        extras = rest(part, _AUDIO_KEYS)
        inner_rest = rest(inner, _INPUT_AUDIO_KEYS)
        if inner_rest:
            extras["$input_audio"] = inner_rest
        return Media(kind="audio", data=data, media_type=_AUDIO_MEDIA.get(fmt, f"audio/{fmt}"),
                     extras={NAME: extras} if extras else {})
    if kind == "file":
        return _parse_file(part, path)
    if kind == "thinking":
        found = _parse_thinking(part)
        if found is not None:
            return found
    if type(kind) is not str:
        raise wrong(f"{path}.type", "'type'", "a string", kind)
    if strict:
        raise ParseError(f"unknown content part type '{kind}'", path=path, code="unknown_block")
    return Opaque(provider=NAME, item_type=kind, payload=dict(part))


def _parse_image(part: dict, path: str) -> Media:
    inner = req_dict(part, "image_url", path)
    ipath = f"{path}.image_url"
    url = req_str(inner, "url", ipath)
    extras = rest(part, _IMAGE_KEYS)
    if "detail" in inner:
        extras["detail"] = inner["detail"]
    inner_rest = rest(inner, _IMAGE_URL_KEYS)
    if inner_rest:
        extras["$image_url"] = inner_rest
    slots = {NAME: extras} if extras else {}
    split = split_data_url(url)
    if split is None:
        return Media(kind="image", url=url, extras=slots)
    return Media(kind="image", media_type=split[0], data=split[1], extras=slots)


def _parse_file(part: dict, path: str) -> Media:
    inner = req_dict(part, "file", path)
    ipath = f"{path}.file"
    file_data = opt_str(inner, "file_data", ipath)
    file_id = opt_str(inner, "file_id", ipath)
    filename = opt_str(inner, "filename", ipath)
    extras = rest(part, _FILE_KEYS)
    inner_rest = rest(inner, _FILE_FILE_KEYS)
    if inner_rest:
        extras["$file"] = inner_rest
    form: dict[str, Any] = {"part": "file"}
    media_type = data = None
    if file_data is not None:
        split = split_data_url(file_data)
        if split is None:
            data = file_data  # bare base64: keep it and say so, the rebuild must not add a prefix
            form["bare_data"] = True
        else:
            media_type, data = split
    kind = "file"
    if media_type is not None:
        if media_type == "application/pdf" or media_type.startswith("text/"):
            kind = "document"
        elif media_type.startswith("image/"):
            kind = "image"
        elif media_type.startswith("audio/"):
            kind = "audio"
    for key in ("file_data", "file_id", "filename"):
        if key in inner and inner[key] is None:
            form.setdefault("null", []).append(key)
    return Media(kind=kind, media_type=media_type, data=data, file_id=file_id, filename=filename,
                 extras={NAME: extras} if extras else {}, form={NAME: form})


def _parse_thinking(part: dict) -> Reasoning | None:
    """Mistral's `{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}` part, when it has
    exactly that shape; anything else stays Opaque."""
    chunks = part.get("thinking")
    if type(chunks) is not list or len(chunks) != 1:
        return None
    chunk = chunks[0]
    if type(chunk) is not dict or chunk.get("type") != "text" or type(chunk.get("text")) is not str or len(chunk) != 2:
        return None
    extras = rest(part, _THINKING_KEYS)
    return Reasoning(text=chunk["text"], origin=NAME, extras={NAME: extras} if extras else {},
                     form={NAME: {"part": "thinking"}})


# --- content parts: write -----------------------------------------------------------------------

def text_part(block: Text) -> dict:
    own = block.extras.get(NAME)
    if not own:
        return {"type": "text", "text": block.text}
    if own.get("refusal") is True:
        out = {"type": "refusal", "refusal": block.text}
        out.update((k, v) for k, v in own.items() if k != "refusal")
        return out
    out = {"type": "text", "text": block.text}
    out.update(own)
    return out


def is_plain_text(block: Any) -> bool:
    return type(block) is Text and not block.extras.get(NAME)


def media_part(block: Media, path: str, ledger: Ledger, same_format: bool) -> dict | None:
    """The content part for a media block, or None after a ledger entry when Chat cannot carry it."""
    own = block.extras.get(NAME) or {}
    form = block.form.get(NAME) or {}
    kind = block.kind
    if form.get("part") == "file" or kind in ("document", "file"):
        return _file_part(block, own, form, path, ledger)
    if kind == "image":
        if block.url is not None:
            url = block.url
            if not same_format and not url.startswith(("http://", "https://", "data:")):
                ledger.add("dropped", path, f"image at '{url[:40]}': Chat fetches only http(s) and data URLs")
                return None
        elif block.data is not None:
            media_type = block.media_type
            if not media_type:
                ledger.add("synthesized", path, "image without a media type: wrote image/png in its data URL")
                media_type = "image/png"
            url = data_url(media_type, block.data)
        elif block.file_id is not None:
            ledger.add("dropped", path, "image given by file id: Chat Completions image parts take only URLs")
            return None
        else:
            ledger.add("dropped", path, "image without data or URL")
            return None
        inner: dict[str, Any] = {"url": url}
        if "detail" in own:
            inner["detail"] = own["detail"]
        if "$image_url" in own:
            inner.update(own["$image_url"])
        out = {"type": "image_url", "image_url": inner}
        out.update((k, v) for k, v in own.items() if k not in ("detail", "$image_url"))
        return out
    if kind == "audio":
        if block.data is None:
            ledger.add("dropped", path, "audio by URL or file id: Chat Completions input_audio takes base64 data only")
            return None
        media_type = block.media_type or ""
        fmt = _AUDIO_FORMAT.get(media_type) or (media_type[6:] if media_type.startswith("audio/") else "")
        if not same_format and fmt not in OFFICIAL_AUDIO_FORMATS:
            ledger.add("dropped", path, f"audio of type '{media_type}': Chat Completions accepts wav and mp3 only")
            return None
        inner = {"data": block.data, "format": fmt}
        if "$input_audio" in own:
            inner.update(own["$input_audio"])
        out = {"type": "input_audio", "input_audio": inner}
        out.update((k, v) for k, v in own.items() if k != "$input_audio")
        return out
    ledger.add("dropped", path, f"{kind} content has no place in Chat Completions messages")
    return None


def _file_part(block: Media, own: dict, form: dict, path: str, ledger: Ledger) -> dict | None:
    inner: dict[str, Any] = {}
    if block.data is not None:
        if form.get("bare_data"):
            inner["file_data"] = block.data
        else:
            inner["file_data"] = data_url(block.media_type or "application/octet-stream", block.data)
    if block.file_id is not None:
        inner["file_id"] = block.file_id
    if block.filename is not None:
        inner["filename"] = block.filename
    for key in form.get("null", ()):
        inner.setdefault(key, None)
    if "file_data" not in inner and "file_id" not in inner:
        if block.text is not None:
            ledger.add("folded", path, "plain-text document written as a text part")
            return {"type": "text", "text": block.text}
        ledger.add("dropped", path, f"{block.kind} by URL: Chat Completions file parts take data or a file id")
        return None
    if "$file" in own:
        inner.update(own["$file"])
    out = {"type": "file", "file": inner}
    out.update((k, v) for k, v in own.items() if k != "$file")
    return out


def thinking_part(block: Reasoning) -> dict:
    out = {"type": "thinking", "thinking": [{"type": "text", "text": block.text or ""}]}
    out.update(block.extras.get(NAME) or {})
    return out


# --- shared by parse and write ----------------------------------------------------------------

def loads(raw: str) -> tuple[Any, bool]:
    """A call's arguments string decoded by the project's JSON policy (exact big integers, no lone
    surrogates, bounded depth); (UNSET, False) when refused: the raw string stays the truth."""
    return jsonpolicy.parse_or_unset(raw, UNSET)


def default_mode(content: list | tuple, role: str, has_calls: bool) -> str:
    """How the serializer writes `content` (given the blocks or parts that go into it) when no form
    says otherwise: a lone plain text as a string, nothing as null beside calls, else a list."""
    if not content:
        return "null" if has_calls and role == "assistant" else "string"
    if len(content) == 1 and is_plain_text(content[0]):
        return "string"
    return "list"


def default_lead(system: tuple, developer: tuple) -> list:
    lead = []
    if system:
        lead.append(["system", len(system), default_mode(system, "system", False)])
    if developer:
        lead.append(["developer", len(developer), default_mode(developer, "developer", False)])
    return lead
