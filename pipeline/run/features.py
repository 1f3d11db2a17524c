"""The `huggingface` schema metadata of the Parquet files: the features `datasets.load_dataset` gives,
declared rather than inferred. JSON columns stored as Arrow's JSON type are declared `Json`, so
`datasets` hands out each value as the object it is (a call keeps its own argument keys) instead of
inferring one struct for all of them, which fills every call with the other calls' keys as nulls.
Built from the Arrow schema alone: no `datasets` import in the workers."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

_VALUES = {pa.string(): "string", pa.int8(): "int8", pa.int32(): "int32", pa.int64(): "int64",
           pa.bool_(): "bool", pa.float64(): "float64"}


def feature(kind: pa.DataType) -> dict[str, Any]:
    if isinstance(kind, pa.JsonType):
        return {"_type": "Json"}
    if pa.types.is_list(kind):
        return {"feature": feature(kind.value_type), "_type": "List"}
    if kind in _VALUES:
        return {"dtype": _VALUES[kind], "_type": "Value"}
    raise TypeError(f"no datasets feature declared for Arrow type {kind}")


def with_features(schema: pa.Schema) -> pa.Schema:
    features = {field.name: feature(field.type) for field in schema}
    return schema.with_metadata({"huggingface": json.dumps({"info": {"features": features}})})


def json_array(values: list[str | None]) -> pa.Array:
    """JSON texts as an Arrow JSON column (stored as strings, read back as strings by pyarrow and polars)."""
    from .arrow_columns import arrow_array  # features.py is read by the schema alone: keep it light

    return pa.ExtensionArray.from_storage(pa.json_(), arrow_array(values, pa.string()))
