"""Harmony tool definitions: JSON Schema written as the TypeScript-like signatures of the `functions`
namespace, the way openai-harmony writes them (the reference for gpt-oss tokens), what that loses, and
a reader from the signature text back to a JSON Schema.

    // Gets the weather            <- one `// ` line per line of the tool description
    type get_weather = (_: {
    // City name                   <- a property's description (title and examples also become comments)
    city: string,
    unit?: "c" | "f", // default: "c"
    }) => any;

Writer rules (observed from openai-harmony 0.0.8): objects list their properties in schema order, `?`
marking the optional ones, nested objects indented by four spaces; `integer` is written `number`; a
string `enum` becomes a union of quoted strings; `oneOf` a union of ` | ` lines; `nullable` adds
` | null`; anything else (`$ref`, `anyOf`, `allOf`, `type: null`...) is `any`. A schema keyword outside
these is not carried: `uncarried` lists them for the ledger.

The reader is the writer's inverse on what the writer produces for common schemas; text it cannot read
(a description holding a newline, `oneOf`) comes back as {"x-harmony-signature": TEXT}. Either way it is
a function of the text, so comparing read-back schemas compares the rendered signatures.
"""

from __future__ import annotations

import json
import math
from typing import Any

from msgspec import UNSET, UnsetType

SIGNATURE_KEY = "x-harmony-signature"
_CARRIED_PROPERTY = {"title", "description", "examples", "default", "nullable"}


# --- writing ----------------------------------------------------------------------------------------

def description_lines(description: str | None) -> list[str]:
    """Lines of a tool description as the writer splits them (Rust's `str::lines`): at \\n, a \\r right
    before a \\n dropped, no line after a final newline, none at all for an empty description."""
    if not description:
        return []
    lines = description.split("\n")
    last = lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines + [last] if last else lines


def signature(parameters: Any | UnsetType) -> str:
    """What follows `type NAME = `: `() => any` without a schema, else `(_: TYPE) => any`."""
    if parameters is UNSET or parameters is None:
        return "() => any"
    return f"(_: {typescript(parameters)}) => any"


def tool_definition(name: str, description: str | None, parameters: Any | UnsetType) -> str:
    """One tool of the `functions` namespace, without the blank line that follows it."""
    comments = "".join(f"// {line}\n" for line in description_lines(description))
    return f"{comments}type {name} = {signature(parameters)};"


def _is_enum(schema: Any) -> bool:
    return isinstance(schema, dict) and isinstance(schema.get("enum"), list) and bool(schema["enum"])


def float_text(number: float) -> str:
    """A float as openai-harmony writes it (Rust's ryu): shortest digits, decimal notation while the
    decimal exponent is within -5 < e <= 16, else `1.5e-7`; Python writes 1e-05 as `1e-05`, ryu `0.00001`."""
    if number == 0:
        return "-0.0" if math.copysign(1.0, number) < 0 else "0.0"
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = "" if fraction == "0" else fraction
    digits = (whole + fraction).lstrip("0")
    k = (int(exponent) if exponent else 0) - len(fraction)  # number = digits * 10**k
    trimmed = digits.rstrip("0")
    k += len(digits) - len(trimmed)
    n = len(trimmed)
    point = n + k  # where the decimal point falls in `trimmed`
    if k >= 0 and point <= 16:
        text = trimmed + "0" * k + ".0"
    elif 0 < point <= 16:
        text = trimmed[:point] + "." + trimmed[point:]
    elif -5 < point <= 0:
        text = "0." + "0" * -point + trimmed
    else:
        text = trimmed[0] + ("." + trimmed[1:] if n > 1 else "") + f"e{point - 1}"
    return ("-" if number < 0 else "") + text


def _compact(value: Any) -> str:
    """Compact JSON as openai-harmony writes a default (serde_json): no spaces, floats by `float_text`."""
    match value:
        case float():
            return float_text(value)
        case list():
            return "[" + ",".join(map(_compact, value)) + "]"
        case dict():
            items = (f"{json.dumps(str(k), ensure_ascii=False)}:{_compact(v)}" for k, v in value.items())
            return "{" + ",".join(items) + "}"
        case _:
            return json.dumps(value, ensure_ascii=False)


def _default_comment(schema: dict, quoted_enum: bool) -> str:
    """`default: ...` for a schema with a default: a plain string quoted raw, an enum's string bare
    (in a property) or as JSON (in a union variant), anything else as compact JSON."""
    value = schema["default"]
    if isinstance(value, str) and not _is_enum(schema):
        return f'default: "{value}"'
    if isinstance(value, str) and not quoted_enum:
        return f"default: {value}"
    return f"default: {_compact(value)}"


def _nullable(schema: Any, written: str) -> str:
    if isinstance(schema, dict) and schema.get("nullable") is True and "null" not in written:
        return written + " | null"
    return written


def _text(schema: dict, key: str) -> str | None:
    value = schema.get(key)
    return value if isinstance(value, str) else None


def typescript(schema: Any, indent: str = "") -> str:
    """The TypeScript type of a JSON Schema, as openai-harmony writes it."""
    if not isinstance(schema, dict):
        return "any"
    variants = schema.get("oneOf")
    if isinstance(variants, list):
        out = []
        for variant in variants:
            written = _nullable(variant, typescript(variant, indent + "   "))
            comments = []
            if isinstance(variant, dict):
                if _text(variant, "description") is not None:
                    comments.append(variant["description"])
                if "default" in variant:
                    comments.append(_default_comment(variant, quoted_enum=True))
            out.append(f"\n{indent} | {written}" + (f" // {' '.join(comments)}" if comments else ""))
        return "".join(out)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if t == "integer" else t for t in kind if isinstance(t, str)]
        if names:
            return " | ".join(names)
        kind = None
    if not isinstance(kind, str):
        return "any"
    match kind:
        case "object":
            return _object(schema, indent)
        case "string":
            values = schema.get("enum")
            quoted = [f'"{v}"' for v in values if isinstance(v, str)] if isinstance(values, list) else []
            return " | ".join(quoted) if quoted else "string"
        case "number" | "integer":
            return "number"
        case "boolean":
            return "boolean"
        case "array":
            return typescript(schema["items"], indent) + "[]" if "items" in schema else "Array<any>"
        case _:
            return "any"


def _object(schema: dict, indent: str) -> str:
    out = [f"{indent}// {schema['description']}\n" if _text(schema, "description") is not None else "", "{\n"]
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = schema.get("required")
        required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        for key, value in properties.items():
            out.append(_property(key, value, key in required, indent))
    out.append(f"{indent}}}")
    return "".join(out)


def _property(key: str, value: Any, required: bool, indent: str) -> str:
    mark = "" if required else "?"
    spec = value if isinstance(value, dict) else {}
    out = []
    if _text(spec, "title") is not None:
        out.append(f"{indent}// {spec['title']}\n{indent}//\n")
    if "oneOf" not in spec and _text(spec, "description") is not None:
        out.append(f"{indent}// {spec['description']}\n")
    examples = spec.get("examples")
    if isinstance(examples, list) and examples:
        out.append(f"{indent}// Examples:\n")
        out.extend(f'{indent}// - "{example}"\n' for example in examples if isinstance(example, str))
    variants = spec.get("oneOf")
    if isinstance(variants, list):
        own = _text(spec, "description")
        first = variants[0] if variants and isinstance(variants[0], dict) else {}
        above = own is not None and _text(first, "description") != own
        if above:
            out.append(f"{indent}// {own}\n")
        if "default" in spec:
            out.append(f"{indent}// {_default_comment(spec, quoted_enum=False)}\n")
        out.append(f"{indent}{key}{mark}:\n")
        for i, variant in enumerate(variants):
            written = _nullable(variant, typescript(variant, indent + "   "))
            comments = []
            if isinstance(variant, dict):
                text = _text(variant, "description")
                if not (i == 0 and above) and text is not None and text != own:
                    comments.append(text)
                if "default" in variant:
                    comments.append(_default_comment(variant, quoted_enum=False))
            out.append(f"{indent} | {written}" + (f" // {' '.join(comments)}" if comments else "") + "\n")
        out.append(f"{indent},\n")
        return "".join(out)
    out.append(f"{indent}{key}{mark}: {_nullable(value, typescript(value, indent + '    '))},")
    if "oneOf" not in spec and "default" in spec:
        out.append(f" // {_default_comment(spec, quoted_enum=False)}")
    out.append("\n")
    return "".join(out)


# --- what the signature does not carry ----------------------------------------------------------------

# Keywords written wherever the schema sits: as a property (comments, `?`, the default), a union variant.
_BY_PLACE = {"property": {"title", "description", "examples", "default", "nullable"},
             "variant": {"description", "default", "nullable"}, "other": set()}


def uncarried(schema: Any, path: str = "$", place: str = "other") -> list[str]:
    """Keywords of `schema` the signature loses, each with where it was (`minimum at $.properties.n`)."""
    if not isinstance(schema, dict):
        return [] if schema is None else [f"a non-object schema at {path}"]
    keep = set(_BY_PLACE[place])
    lost: list[str] = []
    kind = schema.get("type")
    if isinstance(schema.get("oneOf"), list):
        keep.add("oneOf")
        for i, variant in enumerate(schema["oneOf"]):
            lost += uncarried(variant, f"{path}.oneOf[{i}]", "variant")
    elif isinstance(kind, list) and any(isinstance(t, str) for t in kind):
        keep.add("type")
        if "integer" in kind:
            lost.append(f"integer (written as number) at {path}")
    elif kind in ("object", "string", "number", "integer", "boolean", "array"):
        keep.add("type")
        match kind:
            case "object":
                keep |= {"description", "properties", "required"}
                properties = schema.get("properties")
                for key, value in properties.items() if isinstance(properties, dict) else ():
                    lost += uncarried(value, f"{path}.properties.{key}", "property")
            case "string":
                keep.add("enum")
                values = schema.get("enum")
                if isinstance(values, list) and not all(isinstance(v, str) for v in values):
                    lost.append(f"non-string enum values at {path}")
            case "integer":
                lost.append(f"integer (written as number) at {path}")
            case "array":
                keep.add("items")
                if "items" in schema:
                    lost += uncarried(schema["items"], f"{path}.items")
    return [f"{k} at {path}" for k in schema if k not in keep] + lost


# --- reading back -------------------------------------------------------------------------------------

class _Unreadable(Exception):
    pass


def read_signature(signature: str) -> Any | UnsetType:
    """The parameters of `type NAME = SIGNATURE;`: UNSET for `() => any`, else the schema read from the
    TypeScript (or {SIGNATURE_KEY: text} for text this reader does not understand)."""
    if signature == "() => any":
        return UNSET
    if not (signature.startswith("(_: ") and signature.endswith(") => any")):
        return {SIGNATURE_KEY: signature}
    text = signature[4:-8]
    try:
        schema, end = _read_type(text, 0, "")
        if end != len(text):
            raise _Unreadable
    except _Unreadable:
        return {SIGNATURE_KEY: text}
    return schema


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end == -1 else end


def _object_at(text: str, pos: int, indent: str) -> bool:
    return text.startswith(f"{indent}// ", pos) or text.startswith("{\n", pos)


def _read_type(text: str, pos: int, indent: str) -> tuple[Any, int]:
    """A type written at `pos`: an object (over several lines, maybe an array of them) or one line."""
    if _object_at(text, pos, indent):
        schema, pos = _read_object(text, pos, indent)
        while text.startswith("[]", pos):
            schema, pos = {"type": "array", "items": schema}, pos + 2
        return schema, pos
    end = _line_end(text, pos)
    return _read_inline(text[pos:end]), end


def _read_inline(written: str) -> Any:
    if written.endswith("[]"):
        return {"type": "array", "items": _read_inline(written[:-2])}
    if written == "Array<any>":
        return {"type": "array"}
    parts = written.split(" | ")
    nullable = len(parts) > 1 and parts[-1] == "null"
    values = parts[:-1] if nullable else parts
    if all(len(v) >= 2 and v.startswith('"') and v.endswith('"') for v in values):
        schema: dict[str, Any] = {"type": "string", "enum": [v[1:-1] for v in values]}
        return {**schema, "nullable": True} if nullable else schema
    if len(parts) > 1:
        if not all(p and " " not in p and p not in ("any", "object", "integer") for p in parts):
            raise _Unreadable
        return {"type": parts}
    match written:
        case "string" | "number" | "boolean":
            return {"type": written}
        case "any":
            return {}
        case _:
            raise _Unreadable


def _read_object(text: str, pos: int, indent: str) -> tuple[dict, int]:
    schema: dict[str, Any] = {}
    if text.startswith(f"{indent}// ", pos):
        end = _line_end(text, pos)
        schema["description"] = text[pos + len(indent) + 3:end]
        pos = end + 1
    if not text.startswith("{\n", pos):
        raise _Unreadable
    schema["type"] = "object"
    pos += 2
    properties: dict[str, Any] = {}
    required: list[str] = []
    while not text.startswith(f"{indent}}}", pos):
        if pos >= len(text):
            raise _Unreadable
        key, spec, is_required, pos = _read_property(text, pos, indent)
        if key in properties:
            raise _Unreadable
        properties[key] = spec
        if is_required:
            required.append(key)
    schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema, pos + len(indent) + 1


def _read_comments(text: str, pos: int, indent: str) -> tuple[dict[str, Any], int]:
    """The comment lines above a property: `// TITLE` + `//`, `// DESCRIPTION`, `// Examples:` + items."""
    raw: list[str] = []
    while text.startswith(f"{indent}//", pos):
        end = _line_end(text, pos)
        raw.append(text[pos + len(indent):end])
        pos = end + 1
    spec: dict[str, Any] = {}
    if len(raw) >= 2 and raw[1] == "//" and raw[0].startswith("// "):
        spec["title"] = raw[0][3:]
        raw = raw[2:]
    if raw and raw[0] != "// Examples:":
        if not raw[0].startswith("// "):
            raise _Unreadable
        spec["description"] = raw.pop(0)[3:]
    if raw:
        items = raw[1:]
        if raw[0] != "// Examples:" or not items or not all(e.startswith('// - "') and e.endswith('"') for e in items):
            raise _Unreadable
        spec["examples"] = [e[6:-1] for e in items]
    return spec, pos


def _read_property(text: str, pos: int, indent: str) -> tuple[str, dict, bool, int]:
    spec, pos = _read_comments(text, pos, indent)
    if not text.startswith(indent, pos):
        raise _Unreadable
    end = _line_end(text, pos)
    head = text[pos + len(indent):end]
    colon = head.find(": ")
    if colon <= 0:
        raise _Unreadable
    key, is_required = (head[:colon - 1], False) if head[colon - 1] == "?" else (head[:colon], True)
    at = pos + len(indent) + colon + 2
    if _object_at(text, at, indent + "    "):
        value, after = _read_type(text, at, indent + "    ")
        end = _line_end(text, after)
        tail = text[after:end]
    else:
        line = text[at:end]
        cut = line.find(", // default: ")
        written = line[:cut] if cut != -1 else line[:-1]
        if cut == -1 and not line.endswith(","):
            raise _Unreadable
        value = _read_inline(written)
        tail = line[len(written):]
    if tail == ",":
        default = None
    elif tail.startswith(", // default: "):
        default = tail[14:]
    else:
        raise _Unreadable
    spec.update(value)
    if default is not None:
        spec["default"] = _read_default(default, spec)
    return key, spec, is_required, end + 1


def _read_default(written: str, spec: dict) -> Any:
    if _is_enum(spec):  # an enum's string default is written bare
        try:
            value = json.loads(written)
        except ValueError:
            return written
        return written if isinstance(value, str) else value
    if len(written) >= 2 and written.startswith('"') and written.endswith('"'):
        return written[1:-1]
    try:
        return json.loads(written)
    except ValueError:
        raise _Unreadable from None
