"""One JSON policy for every path in and out: what is read can be written back exactly.

- Integers are exact at any size: msgspec reads (as fast as orjson, which turns integers beyond 64 bits
  into floats); orjson names the line and column of a syntax error; `dumps` writes big integers verbatim.
- Lone surrogates (`"\\ud800"`) are refused at read: no writer, tokenizer or Arrow column can carry them.
- Nesting is bounded at read, to MAX_DEPTH containers: every writer must be able to wrap a record in
  its envelope (a reject, a canonical conversation) and stay under orjson's own limit of 254.

Every failure is a `JsonPolicyError`: a `ValueError` (and a `json.JSONDecodeError`), so callers that
caught the libraries' errors keep working, with a `code` and a JSON `path` for the located reason.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

MAX_DEPTH = 128
MAX_INT_DIGITS = 4300  # Python's own limit for int <-> str; beyond it no writer can print the number
_ORJSON_DEPTH = 254  # orjson refuses to write deeper
_DECODER = msgspec.json.Decoder()  # exact integers at any size, unlike orjson (floats beyond 64 bits)
_INT64 = (-(1 << 63), (1 << 64) - 1)  # what orjson reads and writes as an integer
_COUNT_BELOW = 4096  # texts longer than this go to the exact depth check without counting brackets


class JsonPolicyError(orjson.JSONDecodeError):
    """The text is not JSON, or JSON this project does not accept (too deep, a number too large)."""

    def __init__(self, message: str, *, code: str = "invalid_json", path: str = "$", doc: str = "", pos: int = 0):
        super().__init__(message, doc, pos)
        self.message, self.code, self.path = message, code, path

    def __str__(self) -> str:
        if self.code == "invalid_json":
            return super().__str__()  # "<msg>: line L column C (char P)"
        return self.message if self.path == "$" else f"{self.message} at {self.path}"


def loads(data: bytes | str) -> Any:
    """The JSON value of `data`, by the policy above; JsonPolicyError otherwise."""
    try:
        value = _DECODER.decode(data)
    except msgspec.ValidationError:  # an integer of thousands of digits
        raise JsonPolicyError(f"a number has more than {MAX_INT_DIGITS} digits", code="number_too_large") from None
    except RecursionError:
        raise JsonPolicyError(f"nested deeper than {MAX_DEPTH} levels", code="too_deep") from None
    except (msgspec.DecodeError, UnicodeEncodeError) as exc:  # the latter: a str holding a lone surrogate
        raise _located(data, exc) from None
    # Fewer brackets than MAX_DEPTH cannot nest deeper, and a text holds fewer brackets than characters.
    # Counting them is a prefilter only, worth it on short texts: on long ones it costs about as much as
    # the exact check, which it seldom spares (tool schemas alone hold hundreds).
    size = len(data)
    if size > MAX_DEPTH and (size > _COUNT_BELOW or _brackets(data) > MAX_DEPTH):
        check_depth(value)
    return value


def _brackets(data: bytes | str) -> int:
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def _located(data: bytes | str, exc: Exception) -> JsonPolicyError:
    """msgspec's refusal, with orjson's wording where it has one: it names the line and column."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as located:
        doc = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        return JsonPolicyError(located.msg, doc=doc, pos=located.pos)
    return JsonPolicyError(str(exc))


def check_depth(value: Any) -> None:
    """JsonPolicyError naming the first container nested deeper than MAX_DEPTH, if any."""
    try:
        nest = _NESTS.pop()  # atomic: each thread takes a nest of its own
    except IndexError:
        nest = _nest()
    outer, inner = nest
    inner[0] = value
    try:
        orjson.dumps(outer)
        return  # a C-speed proof that the value is shallow enough
    except TypeError:
        pass  # too deep for orjson, or an exact big integer: walk it
    finally:
        inner[0] = None
        _NESTS.append(nest)
    path = _too_deep(value)
    if path is not None:
        raise JsonPolicyError(f"nested deeper than {MAX_DEPTH} levels", code="too_deep", path=path)


def _nest() -> tuple[list, list]:
    """(outer, inner): _ORJSON_DEPTH - MAX_DEPTH lists, each the only element of the one before; a value
    put in `inner` is as deep inside `outer` as orjson allows a value of MAX_DEPTH levels to be. Kept
    for reuse: building the lists per check cost more than the dump of a small record."""
    inner: list = [None]
    outer = inner
    for _ in range(_ORJSON_DEPTH - MAX_DEPTH - 1):
        outer = [outer]
    return outer, inner


_NESTS: list[tuple[list, list]] = []


def _too_deep(value: Any) -> str | None:
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            children: Any = ((f"{path}.{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            children = ((f"{path}[{i}]", v) for i, v in enumerate(node))
        else:
            continue
        if depth > MAX_DEPTH:
            return path
        stack.extend((child, depth + 1, where) for where, child in children if isinstance(child, (dict, list)))
    return None


def parse_or_unset(raw: str, unset: Any) -> tuple[Any, bool]:
    """(value, True) for a JSON text such as a call's arguments string, (unset, False) when the policy
    refuses it: the raw string then stays the truth."""
    try:
        return loads(raw), True
    except JsonPolicyError:
        return unset, False


def dumps(value: Any, option: int = 0) -> bytes:
    """orjson's bytes, with integers beyond 64 bits written exactly instead of refused."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        exact = _big_ints_verbatim(value)
        if exact is value:
            raise
        return orjson.dumps(exact, option=option)


def dumps_text(value: Any, option: int = 0) -> str:
    return dumps(value, option).decode()


def _big_ints_verbatim(value: Any) -> Any:
    """`value` with each integer orjson cannot write replaced by its digits (the same object when none)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT64[0] <= value <= _INT64[1] else orjson.Fragment(str(value).encode())
    if isinstance(value, dict):
        items = {k: _big_ints_verbatim(v) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(value, (list, tuple)):
        out = [_big_ints_verbatim(v) for v in value]
        return value if all(a is b for a, b in zip(out, value)) else out
    return value
