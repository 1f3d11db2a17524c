"""Arrow arrays of the writers' column types, built from their buffers.

`pa.array` asks of every input whether it is a pandas object, and to ask it imports pandas: a fifth
of a second of the parent's time in a run that never uses pandas. The types the shards hold (strings,
int8/int32, bools, lists of those from numpy) are simple enough to lay out directly: validity bitmap,
offsets, values, as Arrow's columnar format defines them. Anything else goes to `pa.array`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

_INTEGERS = {pa.int8(): np.int8, pa.int32(): np.int32, pa.int64(): np.int64}
_MAX_OFFSET = 2**31 - 1  # string offsets are int32


def arrow_array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """`pa.array(values, type=kind)`, for a list of Python values (None: null) or a numpy array; a
    string column also takes UTF-8 bytes for its values."""
    if isinstance(values, np.ndarray) and kind in _INTEGERS:
        data = np.ascontiguousarray(values, dtype=_INTEGERS[kind])
        return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])
    nulls = [value is None for value in values] if not isinstance(values, np.ndarray) else []
    null_count = sum(nulls)
    validity = _bitmap(np.logical_not(nulls)) if null_count else None
    if kind == pa.string():
        # bytes: UTF-8 text already (the rows' JSON columns)
        encoded = [b"" if value is None else value if type(value) is bytes else value.encode("utf-8")
                   for value in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        if offsets[-1] <= _MAX_OFFSET:
            return pa.Array.from_buffers(kind, len(encoded), [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                              pa.py_buffer(b"".join(encoded))], null_count)
    elif kind in _INTEGERS:
        data = np.array([0 if value is None else value for value in values], dtype=_INTEGERS[kind])
        return pa.Array.from_buffers(kind, len(data), [validity, pa.py_buffer(data)], null_count)
    elif kind == pa.bool_():
        data = _bitmap(np.array([bool(value) for value in values], dtype=bool))
        return pa.Array.from_buffers(kind, len(values), [validity, data], null_count)
    return pa.array(values, type=kind)


def list_array(offsets: np.ndarray, values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A list<kind> column: row i is values[offsets[i]:offsets[i + 1]] (int32 offsets)."""
    return pa.ListArray.from_arrays(arrow_array(np.asarray(offsets, dtype=np.int32), pa.int32()),
                                    arrow_array(values, kind))


def _bitmap(bits: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(bits, bitorder="little"))
