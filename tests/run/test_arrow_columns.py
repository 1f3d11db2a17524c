"""The writers' Arrow columns, built from buffers, equal what pa.array builds from the same values."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.run.arrow_columns import arrow_array, list_array

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)))  # Arrow strings are UTF-8: no lone surrogates


def _same(values, kind):
    built = arrow_array(values, kind)
    built.validate(full=True)
    expected = pa.array(values, type=kind)
    assert built.equals(expected), (built, expected)
    assert built.null_count == expected.null_count


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.none() | _TEXT))
def test_strings_with_nulls(values):
    _same(values, pa.string())


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.none() | _TEXT))
def test_strings_given_as_utf8_bytes(values):
    as_bytes = [None if v is None else v.encode() for v in values]
    assert arrow_array(as_bytes, pa.string()).equals(pa.array(values, type=pa.string()))
    mixed = [v if i % 2 else b for i, (v, b) in enumerate(zip(values, as_bytes))]
    assert arrow_array(mixed, pa.string()).equals(pa.array(values, type=pa.string()))


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.none() | st.integers(-2**31, 2**31 - 1)))
def test_int32_with_nulls(values):
    _same(values, pa.int32())


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.none() | st.integers(-128, 127)))
def test_int8_with_nulls(values):
    _same(values, pa.int8())


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.none() | st.booleans()))
def test_bools_with_nulls(values):
    _same(values, pa.bool_())


@settings(deadline=None)  # the first pa.array imports pandas
@given(st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=20), max_size=20))
def test_list_columns_from_offsets_and_values(rows):
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(row) for row in rows], out=offsets[1:])
    values = np.array([v for row in rows for v in row], dtype=np.int32)
    built = list_array(offsets, values, pa.int32())
    built.validate(full=True)
    assert built.equals(pa.array(rows, type=pa.list_(pa.int32())))


def test_an_int_out_of_range_is_refused_like_pa_array():
    for build in (lambda: arrow_array([2**31], pa.int32()), lambda: pa.array([2**31], type=pa.int32())):
        try:
            build()
        except (OverflowError, pa.ArrowInvalid):
            continue
        raise AssertionError("an int32 column took 2**31")


def test_writing_shards_does_not_import_pandas(tmp_path):
    """The reason for building the columns by hand: the run's parent never needs pandas."""
    code = f"""
import sys
from pathlib import Path
from pipeline.run.writers import ShardWriter, SCHEMA
writer = ShardWriter(Path({str(tmp_path)!r}), "parquet", 10)
row = {{name: None for name in SCHEMA.names if name not in ("labels", "attention_mask")}}
row.update(id="a", input_ids=[1, 2, 3], loss_mask=[0, 1, 1], num_tokens=3, trimmed=False, messages="[]")
writer.write(row)
writer.close()
print("pandas" in sys.modules)
"""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "data-00000.parquet")
    assert table.column("input_ids").to_pylist() == [[1, 2, 3]]
    assert table.column("labels").to_pylist() == [[-100, 2, 3]]
    assert table.column("id").to_pylist() == ["a"]


def test_a_lone_surrogate_is_refused_like_pa_array():
    for build in (lambda: arrow_array(["a\ud800"], pa.string()), lambda: pa.array(["a\ud800"], type=pa.string())):
        try:
            build()
        except UnicodeEncodeError:
            continue
        raise AssertionError("a string column took a lone surrogate")
