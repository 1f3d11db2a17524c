"""A fast BPE engine behind the Tokenizer, used only where it gives HF tokenizers' ids.

The renderer tokenizes the text between added tokens piece by piece (`segments`). A fast engine
(`fastokens` or `gigatoken`, both Rust) can encode those pieces instead of `tokenizers`. It gives ids
only; the offsets the span mapping needs come from each token's byte length (byte-level BPE: one
character of the vocabulary string per byte), mapped to characters as HF maps them (a token that
splits a character spans that whole character).

Trust is earned, not assumed: an engine is chosen per tokenizer only after a self-check at load (a
fixed probe set: mixed scripts, the tokenizer's added tokens, digits, whitespace runs, long words;
ids and offsets equal to HF's), and checked while running: one piece in N it encodes (at seeded random
gaps, the first piece included) is encoded by HF too, and any difference raises `TokenizerDisagreement`
with the text, which stops the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
import threading
import unicodedata
from array import array
from itertools import chain
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import tokenizers as hf_tokenizers

from ..errors import ConfigError

__all__ = ["BACKENDS", "ENGINES", "FastEncoder", "TokenizerDisagreement", "choose_backend", "first_engine",
           "load_engine", "prefetch_engine", "PROBES"]

_INT32 = "i" if array("i").itemsize == 4 else "l"
Encoded = tuple[list[int], array, array, bytes]  # ids, token starts, token ends (chars, in the piece), ids as <i4


class TokenizerDisagreement(RuntimeError):
    """A fast engine gave other ids (or offsets) than HF tokenizers for a text: a bug in the engine, or a
    tokenizer it does not implement faithfully. Not a bad record: the run stops."""

    def __init__(self, tokenizer: str, engine: str, text: str, fast: Sequence[int], reference: Sequence[int]):
        self.tokenizer, self.engine, self.text = tokenizer, engine, text
        self.fast, self.reference = list(fast), list(reference)
        at = next((i for i, (a, b) in enumerate(zip(self.fast, self.reference)) if a != b),
                  min(len(self.fast), len(self.reference)))
        shown = text if len(text) <= 2000 else text[:2000] + f"... ({len(text):,} characters)"
        super().__init__(f"tokenizer '{tokenizer}': {engine} and HF tokenizers disagree on this text (first "
                         f"difference at token {at}: {engine} {self.fast[at:at + 5]}, HF {self.reference[at:at + 5]}); "
                         f"set [render] tokenizer_backend = \"hf\" to run without {engine}. Text: {shown!r}")

    def __reduce__(self):  # crosses the worker pipe whole
        return type(self), (self.tokenizer, self.engine, self.text, self.fast, self.reference)


# --- the engines -----------------------------------------------------------------------------------

class Engine(Protocol):
    name: str

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Plain-text pieces (no added token in them) -> (every id, flat; n+1 bounds into it)."""


class _Fastokens:
    name = "fastokens"

    def __init__(self, tokenizer_json: str):
        import fastokens

        # One worker per core already: an engine thread pool per worker would only compete with them.
        os.environ.setdefault("FASTOKENS_BPE_THREADS", "1")
        self._tokenizer = fastokens.Tokenizer.from_json_str(tokenizer_json)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, bounds = self._tokenizer.encode_batch_flat(texts)
        return np.frombuffer(ids, dtype="<u4"), np.frombuffer(bounds, dtype="<u8").astype(np.int64)


class _Gigatoken:
    name = "gigatoken"

    def __init__(self, tokenizer_json: str):
        import gigatoken

        self._tokenizer = gigatoken.Tokenizer.from_json(tokenizer_json)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        rows = self._tokenizer.encode_batch_list(texts, parallel=False)  # the workers are the parallelism
        bounds = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(row) for row in rows], out=bounds[1:])
        return np.fromiter(chain.from_iterable(rows), dtype=np.uint32, count=int(bounds[-1])), bounds


ENGINES: dict[str, Callable[[str], Engine]] = {"fastokens": _Fastokens, "gigatoken": _Gigatoken}
BACKENDS = ("auto", "hf", *ENGINES)


class _Build(threading.Thread):
    """An engine built in a thread of its own: the engines build in Rust without the GIL (1.5 s for a
    large vocabulary), so the build overlaps HF tokenizers parsing the same tokenizer.json."""

    def __init__(self, name: str, tokenizer_json: str):
        super().__init__(name=f"sftprep-build-{name}", daemon=True)
        self.engine_name, self.tokenizer_json = name, tokenizer_json
        self.engine: Engine | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.engine = ENGINES[self.engine_name](self.tokenizer_json)
        except BaseException as exc:  # raised again, as load_engine raises it, where the engine is taken
            self.error = exc
        self.tokenizer_json = ""


# (engine name, sha256 of the tokenizer.json) -> its build, until load_engine takes it
_builds: dict[tuple[str, str], _Build] = {}
_builds_lock = threading.Lock()


def prefetch_engine(name: str, tokenizer_json: str, fingerprint: str) -> None:
    """Start building engine `name` over this tokenizer.json (`fingerprint`: its sha256); `load_engine`
    with the same fingerprint takes it, and `choose_backend` joins whatever it did not take, so no
    build thread outlives the choice (the local engine forks only a single-threaded process)."""
    if name not in ENGINES:
        return  # load_engine names the valid ones
    with _builds_lock:
        if (name, fingerprint) not in _builds:
            build = _builds[(name, fingerprint)] = _Build(name, tokenizer_json)
            build.start()


def _take_build(name: str, fingerprint: str | None) -> _Build | None:
    with _builds_lock:
        build = _builds.pop((name, fingerprint), None) if fingerprint is not None else None
    if build is not None:
        build.join()
    return build


def _join_builds(fingerprint: str) -> None:
    """Wait for (and drop) the builds over this tokenizer that no one took."""
    with _builds_lock:
        left = [key for key in _builds if key[1] == fingerprint]
        builds = [_builds.pop(key) for key in left]
    for build in builds:
        build.join()


def load_engine(name: str, tokenizer_json: str, fingerprint: str | None = None) -> Engine:
    """An engine by name over a tokenizer.json (the one `prefetch_engine` started for `fingerprint`, if
    any); ConfigError when it is not installed or cannot read it."""
    if name not in ENGINES:
        raise ConfigError(f"unknown tokenizer engine '{name}'; valid: {', '.join(ENGINES)}", code="bad_config")
    try:
        build = _take_build(name, fingerprint)
        if build is None:
            return ENGINES[name](tokenizer_json)
        if build.error is not None:
            raise build.error
        assert build.engine is not None
        return build.engine
    except ImportError as exc:
        raise ConfigError(f"tokenizer engine {name} is not installed ({exc})", code="tokenizer_unavailable") from None
    except Exception as exc:  # the engines raise their own types on a tokenizer they cannot load
        raise ConfigError(f"tokenizer engine {name} cannot load this tokenizer: {exc}",
                          code="tokenizer_unavailable") from None


# --- pieces to ids and offsets ---------------------------------------------------------------------

def hf_encode(backend: hf_tokenizers.Tokenizer, texts: list[str], *, batch: bool = True) -> list[Encoded]:
    """The reference: HF tokenizers' ids and character offsets, in the shape the segment cache keeps.
    `batch=False` encodes one text at a time, which never starts HF's thread pool: the checks run in
    the parent before it forks the workers, and a child forked from a process whose pool has run can
    hang in its next `encode_batch`."""
    encodings = (backend.encode_batch(texts, add_special_tokens=False) if batch
                 else [backend.encode(text, add_special_tokens=False) for text in texts])
    out = []
    for encoding in encodings:
        ids, offsets = encoding.ids, encoding.offsets
        out.append((ids, array(_INT32, [o[0] for o in offsets]), array(_INT32, [o[1] for o in offsets]),
                    _int32_le(ids)))
    return out


def _int32_le(ids: list[int]) -> bytes:
    out = array(_INT32, ids)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


class FastEncoder:
    """Encodes pieces with an engine, as `hf_encode` would: same ids, same offsets. Pieces the
    tokenizer's normalizer would change go to HF (its offsets map back through the normalization)."""

    def __init__(self, engine: Engine, tokenizer_name: str, backend: hf_tokenizers.Tokenizer,
                 byte_lengths: np.ndarray, normal_form: str | None, check_every: int):
        self.engine, self.tokenizer_name, self.backend = engine, tokenizer_name, backend
        self.byte_lengths, self.normal_form, self.check_every = byte_lengths, normal_form, check_every
        self.encoded = self.checked = self.to_hf = 0
        # Gaps between checked pieces are drawn (mean check_every, seeded: runs repeat): a fixed stride
        # would fall on the same place in every conversation of the same shape, and never elsewhere.
        self._gaps = random.Random(check_every)
        self._countdown = 1  # the first piece is checked
        # One int object per id, shared by every encoding: taking ids from it allocates no int, and a
        # piece leaving the segment cache frees none (the cache holds a million ids; each was an object).
        self._id_objects = np.arange(len(byte_lengths)).astype(object)

    @property
    def name(self) -> str:
        return self.engine.name

    def encode(self, texts: list[str], *, check: bool = True) -> list[Encoded]:
        form = self.normal_form
        if form is not None:
            changed = [i for i, text in enumerate(texts) if not unicodedata.is_normalized(form, text)]
            if changed:
                return self._mixed(texts, set(changed), check)
        out = self._fast(texts)
        if check:
            self._check(texts, out)
        return out

    def _mixed(self, texts: list[str], to_hf: set[int], check: bool) -> list[Encoded]:
        self.to_hf += len(to_hf)
        fast_texts = [t for i, t in enumerate(texts) if i not in to_hf]
        fast = iter(self._fast(fast_texts) if fast_texts else ())
        hf = iter(hf_encode(self.backend, [texts[i] for i in sorted(to_hf)], batch=False))
        out = [next(hf) if i in to_hf else next(fast) for i in range(len(texts))]
        if check:
            self._check(fast_texts, [o for i, o in enumerate(out) if i not in to_hf])
        return out

    def _fast(self, texts: list[str]) -> list[Encoded]:
        self.encoded += len(texts)
        ids, bounds = self.engine.encode(texts)
        top = int(ids.max()) if len(ids) else -1
        known = top < len(self.byte_lengths)  # else an id outside the vocabulary: fails the byte check
        lengths = self.byte_lengths.take(ids) if known else np.zeros(len(ids), dtype=np.int64)
        # Array methods rather than the np.* functions: the same results without their Python dispatch,
        # which costs more than the work on the few tokens of a typical batch of misses.
        byte_end = lengths.cumsum()
        byte_start = byte_end - lengths
        joined = "".join(texts)
        chars = np.zeros(len(texts) + 1, dtype=np.int64)
        np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)).cumsum(out=chars[1:])
        if joined.isascii():
            piece_bytes = chars
            start, end = byte_start, byte_end
        else:
            data = np.frombuffer(joined.encode("utf-8"), dtype=np.int8)
            leads = data >= -64  # a UTF-8 lead byte starts a character (continuations are 0x80..0xBF)
            char_of_byte = leads.astype(np.int64).cumsum() - 1  # (a bool cumsum casts per element: slower)
            # each piece's first byte: its first character's lead byte, the first byte of that character
            # (the end, past the last piece)
            piece_bytes = char_of_byte.searchsorted(chars, "left")
            if len(ids) and byte_end[-1] != len(data):
                self._fail_on_bytes(texts, ids, bounds, byte_end, piece_bytes)
            start = char_of_byte[byte_start] if len(ids) else byte_start
            end = char_of_byte[byte_end - 1] + 1 if len(ids) else byte_end
        # Every piece's tokens must cover exactly its bytes: else the offsets below would be garbage.
        ends_at = np.concatenate(([0], byte_end))[bounds]
        if ends_at.shape != piece_bytes.shape or not (ends_at == piece_bytes).all():
            self._fail_on_bytes(texts, ids, bounds, byte_end, piece_bytes)
        base = chars[:-1].repeat(bounds[1:] - bounds[:-1])
        # Whole arrays once, then sliced per piece (slicing an array or bytes is one C call)
        all_starts = array(_INT32, (start - base).astype(np.int32).tobytes())
        all_ends = array(_INT32, (end - base).astype(np.int32).tobytes())
        all_ids = self._id_objects.take(ids).tolist() if known else ids.tolist()
        le = ids.astype("<i4").tobytes()
        cuts = bounds.tolist()
        return [(all_ids[a:b], all_starts[a:b], all_ends[a:b], le[4 * a:4 * b]) for a, b in zip(cuts, cuts[1:])]

    def _fail_on_bytes(self, texts, ids, bounds, byte_end, piece_bytes) -> None:
        """The engine's tokens do not spell the text: name the first piece where that happens."""
        ends_at = np.concatenate(([0], byte_end))[bounds]
        i = int(np.flatnonzero(np.diff(ends_at) != np.diff(piece_bytes))[0]) if len(texts) else 0
        reference = self.backend.encode(texts[i], add_special_tokens=False).ids
        raise TokenizerDisagreement(self.tokenizer_name, self.name, texts[i],
                                    ids[bounds[i]:bounds[i + 1]].tolist(), reference)

    def _check(self, texts: list[str], out: list[Encoded]) -> None:
        """One piece in check_every, also through HF: any difference stops the run."""
        if not self.check_every or not texts:
            return
        picked = []
        countdown = self._countdown
        for i in range(len(texts)):
            countdown -= 1
            if countdown == 0:
                picked.append(i)
                countdown = self._gaps.randint(1, 2 * self.check_every - 1)
        self._countdown = countdown
        if picked:
            self.checked += len(picked)
            first_difference(self, [texts[i] for i in picked], [out[i] for i in picked])

    def stats(self) -> dict[str, int]:
        return {"encoded": self.encoded, "checked": self.checked, "normalized_to_hf": self.to_hf}


def first_difference(encoder: FastEncoder, texts: list[str], fast: list[Encoded],
                     reference: list[Encoded] | None = None) -> None:
    """Raise TokenizerDisagreement at the first text whose ids or offsets differ from HF's
    (`reference`: HF's encodings of these texts, when already made)."""
    if reference is None:
        reference = hf_encode(encoder.backend, texts, batch=False)
    for text, mine, theirs in zip(texts, fast, reference):
        if mine[0] != theirs[0] or mine[1] != theirs[1] or mine[2] != theirs[2]:
            raise TokenizerDisagreement(encoder.tokenizer_name, encoder.name, text, mine[0], theirs[0])


# --- choosing a backend ----------------------------------------------------------------------------

class _Tokenizer(Protocol):
    name: str
    backend: hf_tokenizers.Tokenizer

    @property
    def added_tokens(self) -> dict[str, int]: ...

    @property
    def segmentable(self) -> bool: ...


_UNICODE_FORMS = {"NFC", "NFD", "NFKC", "NFKD"}


def _unsupported(tokenizer: _Tokenizer) -> str | None:
    """Why a fast engine cannot stand in for this tokenizer (None: it can, if its self-check passes)."""
    if not tokenizer.segmentable:
        return "its pieces between added tokens do not encode independently"
    model = tokenizer.backend.model  # its attributes, not its state: that would serialize the vocabulary
    if not isinstance(model, hf_tokenizers.models.BPE) or model.dropout or model.byte_fallback:
        return "it is not a deterministic byte-level BPE"
    pre = _state(tokenizer.backend.pre_tokenizer)
    if not _has_type(pre, "ByteLevel"):
        return "it has no ByteLevel pre-tokenizer (token lengths in bytes are unknown)"
    normalizer = _state(tokenizer.backend.normalizer)
    if normalizer is not None and normalizer.get("type") not in _UNICODE_FORMS:
        return f"its normalizer ({normalizer.get('type')}) is not a plain Unicode normal form"
    return None


def _state(part: Any) -> Any:
    return None if part is None else json.loads(part.__getstate__())


def _has_type(node: Any, kind: str) -> bool:
    if node is None:
        return False
    return node.get("type") == kind or any(_has_type(c, kind) for c in node.get("pretokenizers") or ())


def byte_lengths(backend: hf_tokenizers.Tokenizer) -> np.ndarray:
    """Bytes per token id: a byte-level vocabulary writes each byte as one character."""
    table = np.zeros(backend.get_vocab_size(with_added_tokens=True), dtype=np.int64)
    for token, token_id in backend.get_vocab(with_added_tokens=False).items():
        table[token_id] = len(token)
    return table


def choose_backend(tokenizer: _Tokenizer, backend: str, check_every: int) -> tuple[FastEncoder | None, str]:
    """(the fast encoder, or None for HF tokenizers; a sentence saying what was chosen and why).
    `backend`: "hf"; an engine by name (ConfigError if it cannot serve this tokenizer exactly); or
    "auto": the first engine whose self-check passes, else HF."""
    try:
        return _choose(tokenizer, backend, check_every)
    finally:  # a build `load_tokenizer` started and nothing took
        _join_builds(getattr(tokenizer, "fingerprint", ""))


def first_engine(backend: str) -> str | None:
    """The engine `choose_backend` tries first for this setting (None: HF only), to prefetch."""
    if backend == "hf":
        return None
    return next(iter(ENGINES)) if backend == "auto" else backend


def _choose(tokenizer: _Tokenizer, backend: str, check_every: int) -> tuple[FastEncoder | None, str]:
    if backend == "hf":
        return None, f"tokenizer '{tokenizer.name}': HF tokenizers (tokenizer_backend = \"hf\")"
    if backend != "auto" and backend not in ENGINES:
        raise ConfigError(f"unknown render.tokenizer_backend '{backend}'; valid: {', '.join(BACKENDS)}",
                          code="bad_config")
    candidates = list(ENGINES) if backend == "auto" else [backend]
    reasons = []
    why = _unsupported(tokenizer)
    if why is None:
        tokenizer_json = _tokenizer_json(tokenizer)
        fingerprint = getattr(tokenizer, "fingerprint", None)
        for name in candidates:
            try:
                encoder = FastEncoder(load_engine(name, tokenizer_json, fingerprint), tokenizer.name,
                                      tokenizer.backend, byte_lengths(tokenizer.backend), _normal_form(tokenizer),
                                      check_every)
                self_check(encoder, tokenizer)
            except (ConfigError, TokenizerDisagreement) as exc:
                reasons.append(f"{name}: {exc.message if isinstance(exc, ConfigError) else _short(exc)}")
                continue
            checking = f"HF re-encodes one piece in {check_every}" if check_every else "no running check"
            return encoder, f"tokenizer '{tokenizer.name}': {name} (self-check passed; {checking})"
    else:
        reasons.append(why)
    if backend != "auto":
        raise ConfigError(f"tokenizer '{tokenizer.name}' cannot use tokenizer engine {backend}: {'; '.join(reasons)}",
                          code="tokenizer_backend")
    return None, f"tokenizer '{tokenizer.name}': auto keeps HF tokenizers ({'; '.join(reasons)})"


def _tokenizer_json(tokenizer: _Tokenizer) -> str:
    """The tokenizer.json the tokenizer was loaded from, when it is still that file (its sha256 is the
    fingerprint); else serialized from the backend (slower: half a second for a large vocabulary)."""
    source = getattr(tokenizer, "source", None)
    if source and os.path.isfile(source):
        data = open(source, "rb").read()
        if hashlib.sha256(data).hexdigest() == getattr(tokenizer, "fingerprint", None):
            return data.decode("utf-8")
    return tokenizer.backend.to_str()


def _normal_form(tokenizer: _Tokenizer) -> str | None:
    normalizer = _state(tokenizer.backend.normalizer)
    return None if normalizer is None else normalizer["type"]


def _short(exc: TokenizerDisagreement) -> str:
    return f"disagrees with HF tokenizers on probe {exc.text[:60]!r}"


# --- the self-check --------------------------------------------------------------------------------

PROBES: tuple[str, ...] = (
    "Hello, world! It's a test: we'll see what they'd do, I'M SURE you've NOT.",
    "Grüße aus Köln — naïve café, façade, Ångström, ŁÓDŹ.",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "你好，世界。我们正在测试分词器：繁體字、日本語のテキスト、한국어 문장.",
    "مرحبا بالعالم — שלום עולם — नमस्ते दुनिया — สวัสดีชาวโลก",
    "emoji 😀🙂👍🏽👨‍👩‍👧‍👦🇫🇷 and math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√∞ ≠ ≤",
    "e\u0301 vs \u00e9, A\u030a vs \u00c5, \ufb01 ligature, \u2126 ohm, Ｆｕｌｌ width",
    "0 1 12 123 1234 12345 123456789012345 3.14159 -2.5e-10 0x1F 1,000,000 ٣٤٥ ४२",
    "   leading spaces\t\ttabs\n\n\nnewlines\r\n\r\ncrlf  \u00a0nbsp\u3000ideographic    trailing   ",
    " " * 64 + "\n" * 16 + "\t" * 8 + " \n \n ",
    "a" * 3000,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 40,
    "😀" * 200 + "中" * 300,
    '{"name": "get_weather", "arguments": {"city": "Paris", "units": ["c", "f"], "n": 3}}',
    "def f(x):\n    return [i ** 2 for i in range(x)]  # comment\n\n\nclass A:\n\tpass\n",
    "https://example.com/a/b?c=1&d=%20e#frag user@example.org C:\\path\\to\\file.txt",
    "<|im_start <|im_end| |> <| <tool_call <|endoftext| <|start_header_id <|reserved_special_token",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE ''' \"\"\" ``` --- ___ ***",
    "\x00\x01\x7f\u200b\u200d\ufeff\ufffd\U0010ffff",
    "system\nYou are a helpful assistant.", "assistant\n", "\n\n", "user\nWhat's the weather in Paris?",
    '\n{"name": "search", "arguments": {"query": "flights SFO→JFK on 2024-05-01"}}\n',
)


def probe_pieces(tokenizer: _Tokenizer) -> list[str]:
    """The probe texts, and texts with every added token inside, split at the added tokens as the
    renderer splits them (into the pieces the engine is asked to encode)."""
    added = sorted(tokenizer.added_tokens)
    texts = list(PROBES) + [f"before{token}after {token} x{token}\n" for token in added]
    texts.append("".join(f"{probe}{token}" for probe, token in zip(PROBES * (len(added) // len(PROBES) + 1), added)))
    pattern = "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True))
    pieces: list[str] = []
    for text in texts:
        parts = re.split(pattern, text) if pattern else [text]
        pieces.extend(p for p in parts if p)
    return list(dict.fromkeys(pieces))


def self_check(encoder: FastEncoder, tokenizer: _Tokenizer) -> None:
    """The engine must give HF's ids and offsets on every probe piece, encoded in one batch and one by one
    (against one HF reference: HF encodes each piece alone either way)."""
    pieces = probe_pieces(tokenizer)
    reference = hf_encode(encoder.backend, pieces, batch=False)
    first_difference(encoder, pieces, encoder.encode(pieces, check=False), reference)
    for i, piece in enumerate(pieces[:len(PROBES)]):
        first_difference(encoder, [piece], encoder.encode([piece], check=False), reference[i:i + 1])
    encoder.encoded = encoder.to_hf = 0
