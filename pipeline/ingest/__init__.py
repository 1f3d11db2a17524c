"""From files to records: readers (JSON, JSONL, arrays, gzip, streaming), record shapes and their
detection, exchanges, streams (SSE reassembly), agent sessions, tracing exports, batch results, ShareGPT."""

from .readers import DEFAULT_MAX_RECORD_BYTES, RawRecord, read_records
from .shapes import (INPUT_FORMATS, INPUT_SUFFIXES, RECORD_SHAPES, STREAM_SUFFIXES, Parsed, expand, expand_paths, is_session_log,
                     iter_parsed, iter_raw, parse_record)

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "INPUT_FORMATS", "INPUT_SUFFIXES", "RECORD_SHAPES", "STREAM_SUFFIXES", "Parsed", "RawRecord",
           "expand", "expand_paths", "is_session_log", "iter_parsed", "iter_raw", "parse_record", "read_records"]
