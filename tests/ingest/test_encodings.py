"""Files with a byte order mark: a UTF-8 one is skipped, UTF-16 and UTF-32 files are read as the UTF-8
they encode. Every reader goes through `open_bytes`, so the whole corpus must read the same either way."""

import codecs
import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest import iter_raw, readers

ENCODINGS = {
    "utf-8-bom": lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
    "utf-16-le": lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    "utf-16-be": lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    "utf-32-le": lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
    "utf-32-be": lambda text: codecs.BOM_UTF32_BE + text.encode("utf-32-be"),
}
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
records = st.lists(st.dictionaries(st.text(max_size=4), texts, max_size=3), min_size=1, max_size=6)


def _read(path: Path) -> list[tuple[str, object, object]]:
    return [(r.source, r.value, r.error and r.error.code) for r in readers.read_records(path)]


@settings(max_examples=60, deadline=None)
@given(items=records, encoding=st.sampled_from(sorted(ENCODINGS)), gz=st.booleans(), crlf=st.booleans())
def test_jsonl_in_any_marked_encoding_reads_as_utf8(tmp_path_factory, items, encoding, gz, crlf):
    folder = tmp_path_factory.mktemp("enc")
    text = "".join(json.dumps(item, ensure_ascii=False) + ("\r\n" if crlf else "\n") for item in items)
    plain, marked = folder / "plain.jsonl", folder / "marked.jsonl"
    plain.write_bytes(text.encode("utf-8"))
    data = ENCODINGS[encoding](text)
    marked.write_bytes(gzip.compress(data) if gz else data)
    got = _read(marked)
    assert [(s.replace("marked", "plain"), v, e) for s, v, e in got] == _read(plain)
    assert [v for _, v, _ in got] == items


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_json_document_and_array(tmp_path, encoding):
    doc = {"messages": [{"role": "user", "content": "héllo ✓ 𝄞"}]}
    (tmp_path / "doc.json").write_bytes(ENCODINGS[encoding](json.dumps(doc, ensure_ascii=False, indent=2)))
    (tmp_path / "array.json").write_bytes(ENCODINGS[encoding](json.dumps([doc, doc], ensure_ascii=False)))
    assert [r.value for r in readers.read_records(tmp_path / "doc.json")] == [doc]
    assert [r.value for r in readers.read_records(tmp_path / "array.json")] == [doc, doc]


def test_utf8_bom_offsets_count_from_after_the_mark(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + b'{"a": 1}\n{"b": 2}\n')
    with readers.open_bytes(path) as stream:
        first = stream.readline()
        assert first == b'{"a": 1}\n' and stream.tell() == len(first)
        second = stream.readline()
        stream.seek(len(first))
        assert stream.readline() == second
        stream.seek(0)
        assert stream.read() == first + second


def test_unpaired_surrogate_in_utf16_rejects_its_record_only(tmp_path):
    good = '{"a": "x"}\n'.encode("utf-16-le")
    bad = '{"a": "'.encode("utf-16-le") + b"\x00\xd8" + '"}\n'.encode("utf-16-le")  # a lone high surrogate
    path = tmp_path / "x.jsonl"
    path.write_bytes(codecs.BOM_UTF16_LE + good + bad + good)
    got = _read(path)
    assert [e for _, _, e in got] == [None, "invalid_utf8", None]
    assert [s.rsplit(":", 1)[1] for s, _, _ in got] == ["1", "2", "3"]


def _corpus_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md" and p.stat().st_size < 2_000_000)


@pytest.mark.corpus
@pytest.mark.parametrize("encoding", ["utf-8-bom", "utf-16-le"])
def test_corpus_reads_the_same_with_a_byte_order_mark(corpus, tmp_path, encoding):
    """Every corpus file, marked and re-encoded under its own name: the same records, sources and
    errors (every reader: requests, arrays, sessions, batches, streams, traces)."""
    files = _corpus_files(Path(corpus))
    assert len(files) > 400
    for original in files:
        copy = tmp_path / original.relative_to(corpus)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(ENCODINGS[encoding](original.read_bytes().decode("utf-8")))
    for original in files:
        copy = tmp_path / original.relative_to(corpus)
        assert _located(copy, tmp_path) == _located(original, Path(corpus)), original


def _located(path: Path, root: Path) -> list[tuple[str, str, object]]:
    """The records of a file, its folder's path aside (session results name their file)."""
    return [(r.source.replace(str(root), ""), repr(r.value).replace(str(root), ""), r.error and r.error.code)
            for r in iter_raw([path])]
