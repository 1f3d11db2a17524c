import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest import readers
from pipeline.ingest import expand_paths
from pipeline.errors import ConfigError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(readers, "_CHUNK", 5)  # every buffer boundary case, many times per file


@settings(max_examples=150, deadline=None)
@given(items=st.lists(json_values, max_size=8), indent=st.sampled_from([None, 0, 1, 2]))
def test_array_elements_equal_json_loads(tmp_path_factory, items, indent):
    path = tmp_path_factory.mktemp("a") / "records.json"
    path.write_text(json.dumps(items, indent=indent, ensure_ascii=False))
    for chunk in (5, 1 << 20):
        readers._CHUNK = chunk
        try:
            got = list(readers.read_records(path))
        finally:
            readers._CHUNK = 1 << 20
        assert [r.error for r in got] == [None] * len(items)
        assert [r.value for r in got] == items


def test_array_sources_name_start_lines(tmp_path, small_chunks):
    path = tmp_path / "x.json"
    path.write_text('[\n {"a": "]\\"{"},\n {"b": [1,\n 2]},\n 3, null\n]')
    got = [(r.source.rsplit("/", 1)[1], r.value) for r in readers.read_records(path)]
    assert got == [("x.json:2", {"a": ']"{'}), ("x.json:3", {"b": [1, 2]}), ("x.json:5", 3), ("x.json:5#1", None)]


def test_single_document(tmp_path):
    path = tmp_path / "one.json"
    path.write_text('{"messages": []}')
    assert [(r.value, r.error) for r in readers.read_records(path)] == [({"messages": []}, None)]


def test_jsonl_bad_lines_do_not_stop_the_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n\nnot json\n{"s": "\xff"}\n{"b": 2}')
    got = list(readers.read_records(path))
    assert [r.source.rsplit(":", 1)[1] for r in got] == ["1", "3", "4", "5"]
    assert [r.value for r in got] == [{"a": 1}, None, None, {"b": 2}]
    assert got[1].error.code == "invalid_json" and got[1].raw == b"not json\n"
    assert got[2].error.code == "invalid_utf8" and "0xff" in got[2].error.message


def test_deferred_records_decode_to_what_the_eager_reader_gives(tmp_path):
    (tmp_path / "x.jsonl").write_bytes(b'{"a": 1}\n\nnot json\n{"s": "\xff"}\n{"b": [2]}')
    (tmp_path / "doc.json").write_bytes(b'{"c": 3}')
    (tmp_path / "arr.json").write_bytes(b'[{"d": 4}, 5, "six", {"e": 7}]')
    for path in sorted(tmp_path.iterdir()):
        eager = list(readers.read_records(path))
        deferred = list(readers.read_records(path, defer=True))
        assert all(r.deferred and r.value is None and r.error is None for r in deferred)
        assert [comparable(r.decoded()) for r in deferred] == [comparable(r) for r in eager]
        assert [r.decoded() for r in eager] == eager  # decoding a decoded record returns it


def comparable(raw: readers.RawRecord) -> tuple:
    """A record with its error as plain data (exceptions compare by identity)."""
    error = raw.error and (raw.error.code, raw.error.message, raw.error.path, raw.error.source)
    return raw._replace(error=error)


def test_oversized_line_is_rejected_and_skipped(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"x": "' + b"a" * 5000 + b'"}\n{"ok": 1}\n')
    got = list(readers.read_records(path, max_record_bytes=1000))
    assert got[0].error.code == "record_too_large" and "5,010 bytes" in got[0].error.message
    assert got[1].value == {"ok": 1}


def test_gzip_by_magic_and_corrupt_gzip(tmp_path):
    good = tmp_path / "a.jsonl.gz"
    payload = gzip.compress(b"".join(b'{"i": %d}\n' % i for i in range(2000)))
    good.write_bytes(payload)
    assert [r.value["i"] for r in readers.read_records(good)] == list(range(2000))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(payload[: len(payload) // 2])
    got = list(readers.read_records(cut))
    assert got[-1].error.code == "unreadable_file"
    assert all(r.error is None for r in got[:-1])


def test_truncated_array(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[{"a": 1}, {"b": ')
    got = list(readers.read_records(path))
    assert got[0].value == {"a": 1}
    assert got[1].error.code == "invalid_json" and "truncated" in got[1].error.message


def test_expand_paths(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.jsonl").write_text("")
    (tmp_path / "d" / "a.json.gz").write_bytes(b"")
    (tmp_path / "d" / "notes.txt").write_text("")
    assert [p.name for p in expand_paths([str(tmp_path / "d")])] == ["a.json.gz", "b.jsonl"]
    assert [p.name for p in expand_paths([str(tmp_path / "d" / "*.jsonl")])] == ["b.jsonl"]
    with pytest.raises(ConfigError, match="does not exist"):
        expand_paths([str(tmp_path / "missing.jsonl")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no input files"):
        expand_paths([str(tmp_path / "empty")])
