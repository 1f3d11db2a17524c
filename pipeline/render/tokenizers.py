"""Real tokenizers, offline: the built-in vocabularies come from the `quicktok-v1` package's data files.

`load_tokenizer(name_or_path)` accepts a built-in name (`qwen2.5`, `llama3`, `gpt-oss`), a local
`tokenizer.json`, a tokenizer directory (its `tokenizer_config.json` may carry a chat template), or a hub
id where the network allows. A built-in is built once from the package's rank table (checked against the
official vocabulary's sha256), converted with transformers' TikTokenConverter, and cached as
tokenizer.json in the user cache dir (`SFTPREP_CACHE` overrides); a cache file whose sha256 does not match
its sidecar is rebuilt.

`SegmentEncoder` tokenizes text the way the renderer needs it: split at added tokens, each piece encoded
on its own (identical ids to encoding the whole text), with a bounded LRU of repeated pieces.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct
import sys
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
import tokenizers as hf_tokenizers

from ..errors import ConfigError

__all__ = ["BUILTIN_TOKENIZERS", "Tokenizer", "SegmentEncoder", "Segmented", "load_tokenizer", "cache_dir",
           "tiktoken_file", "builtin_ranks"]

_BUILDER_VERSION = "1"  # bump when the way a built-in is assembled changes: invalidates caches

# --- the built-in vocabularies ---------------------------------------------------------------------

_QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                   r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def _qwen_added() -> tuple[tuple[int, str, bool], ...]:
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
               "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
               "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
    plain = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
             "<|repo_name|>", "<|file_sep|>"]
    tokens = [(t, True) for t in special] + [(t, False) for t in plain]
    return tuple((151643 + i, t, s) for i, (t, s) in enumerate(tokens))


def _llama3_added() -> tuple[tuple[int, str, bool], ...]:
    named = {128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128004: "<|finetune_right_pad_id|>",
             128006: "<|start_header_id|>", 128007: "<|end_header_id|>", 128008: "<|eom_id|>",
             128009: "<|eot_id|>", 128010: "<|python_tag|>"}
    out, reserved = [], 0
    for token_id in range(128000, 128256):
        if token_id in named:
            out.append((token_id, named[token_id], True))
        else:
            out.append((token_id, f"<|reserved_special_token_{reserved}|>", True))
            reserved += 1
    return tuple(out)


def _harmony_added() -> tuple[tuple[int, str, bool], ...]:
    named = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
             200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>",
             200012: "<|call|>", 200018: "<|endofprompt|>"}
    return tuple((i, named.get(i, f"<|reserved_{i}|>"), True) for i in range(199998, 201088))


class _Builtin(NamedTuple):
    vocab_file: str  # data file of the quicktok package
    tiktoken_name: str  # the official file name of the same vocabulary
    sha256: str  # of the tiktoken text form, equal to the official file's
    pattern: str
    added: tuple[tuple[int, str, bool], ...]  # (id, content, special)
    nfc: bool
    ignore_merges: bool
    bos: str | None
    eos: str | None
    pad: str | None


BUILTIN_TOKENIZERS: dict[str, _Builtin] = {
    "qwen2.5": _Builtin("qwen3.vocab", "qwen.tiktoken",
                        "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
                        _QWEN_PATTERN, _qwen_added(), nfc=True, ignore_merges=False,
                        bos=None, eos="<|im_end|>", pad="<|endoftext|>"),
    "llama3": _Builtin("llama3.vocab", "llama3.tiktoken",
                       "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
                       _LLAMA3_PATTERN, _llama3_added(), nfc=False, ignore_merges=True,
                       bos="<|begin_of_text|>", eos="<|eot_id|>", pad="<|finetune_right_pad_id|>"),
    "gpt-oss": _Builtin("o200k.vocab", "o200k_base.tiktoken",
                        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
                        _O200K_PATTERN, _harmony_added(), nfc=False, ignore_merges=True,
                        bos="<|startoftext|>", eos="<|return|>", pad="<|endoftext|>"),
}


def cache_dir() -> Path:
    override = os.environ.get("SFTPREP_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("sftprep"))


def builtin_ranks(name: str) -> dict[bytes, int]:
    """The rank table of a built-in vocabulary (token bytes -> rank), read from quicktok's data file.
    Layout: u32 count, then per token u16 length, the bytes, u32 rank (all little-endian)."""
    spec = _spec(name)
    try:
        data = resources.files("quicktok").joinpath("data", spec.vocab_file).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ConfigError(f"tokenizer '{name}' needs the package quicktok-v1==0.4.0 ({exc})",
                          code="tokenizer_unavailable") from None
    (count,) = struct.unpack_from("<I", data, 0)
    offset, ranks = 4, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2:offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        ranks[token] = rank
        offset += 6 + length
    if offset != len(data):
        raise ConfigError(f"quicktok data file {spec.vocab_file} is malformed", code="tokenizer_unavailable")
    return ranks


def _tiktoken_text(ranks: dict[bytes, int]) -> bytes:
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ordered)


def tiktoken_file(name: str) -> Path:
    """The built-in vocabulary in tiktoken's text format (byte-identical to the official file, sha256
    checked), written once into the cache. openai-harmony and tiktoken can read it offline."""
    spec = _spec(name)
    path = cache_dir() / "vocab" / spec.tiktoken_name
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256:
        return path
    text = _tiktoken_text(builtin_ranks(name))
    digest = hashlib.sha256(text).hexdigest()
    if digest != spec.sha256:
        raise ConfigError(f"vocabulary of '{name}' does not match the official {spec.tiktoken_name} "
                          f"(sha256 {digest}, expected {spec.sha256})", code="tokenizer_checksum")
    _write_atomic(path, text)
    return path


def _spec(name: str) -> _Builtin:
    try:
        return BUILTIN_TOKENIZERS[name]
    except KeyError:
        raise ConfigError(f"unknown built-in tokenizer '{name}'; valid: {', '.join(BUILTIN_TOKENIZERS)}",
                          code="unknown_tokenizer") from None


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _cache_key(name: str, spec: _Builtin) -> str:
    recipe = json.dumps([_BUILDER_VERSION, hf_tokenizers.__version__, name, spec.sha256, spec.pattern,
                         spec.added, spec.nfc, spec.ignore_merges])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def _build(name: str, spec: _Builtin) -> str:
    """tokenizer.json text for a built-in vocabulary."""
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab_path = tiktoken_file(name)  # checks the sha256 of the vocabulary
    ranks = builtin_ranks(name)

    class _Converter(TikTokenConverter):
        # The ranks are already in memory and checked: skip tiktoken's path-keyed global file cache.
        def load_tiktoken_bpe(self, _url):  # type: ignore[override]
            return ranks

    backend = _Converter(vocab_file=str(vocab_path), pattern=spec.pattern).converted()
    backend.model.ignore_merges = spec.ignore_merges
    if spec.nfc:
        backend.normalizer = normalizers.NFC()
    # Added tokens take the next free ids, so adding them in id order puts each at its id.
    for token_id, content, special in spec.added:
        token = AddedToken(content, special=special, normalized=False)
        (backend.add_special_tokens if special else backend.add_tokens)([token])
        if backend.token_to_id(content) != token_id:
            raise ConfigError(f"tokenizer '{name}': {content} landed at id {backend.token_to_id(content)}, "
                              f"expected {token_id}", code="tokenizer_build")
    return backend.to_str()


def _load_builtin(name: str) -> "Tokenizer":
    spec = _spec(name)
    folder = cache_dir() / "tokenizers" / f"{name}-{_cache_key(name, spec)}"
    path, sidecar = folder / "tokenizer.json", folder / "tokenizer.json.sha256"
    text: str | None = None
    if path.is_file() and sidecar.is_file():
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == sidecar.read_text().strip():
            text = data.decode("utf-8")
    if text is None:  # missing or corrupt: rebuild
        text = _build(name, spec)
        data = text.encode("utf-8")
        _write_atomic(path, data)
        _write_atomic(sidecar, (hashlib.sha256(data).hexdigest() + "\n").encode())
    backend = hf_tokenizers.Tokenizer.from_str(text)
    return Tokenizer(name=name, backend=backend, fingerprint=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                     bos_token=spec.bos, eos_token=spec.eos, pad_token=spec.pad, source=str(path))


# --- the wrapper -----------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A `tokenizers.Tokenizer` with the facts the renderer needs: its added tokens, bos/eos, the chat
    template that came with it (if any), and a fingerprint (sha256 of its tokenizer.json)."""

    name: str
    backend: hf_tokenizers.Tokenizer
    fingerprint: str
    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    chat_template: str | None = None
    source: str | None = None

    @cached_property
    def added_tokens(self) -> dict[str, int]:
        """Every added token (special or not): content -> id. The text is split at these before BPE."""
        return {tok.content: token_id for token_id, tok in self.backend.get_added_tokens_decoder().items()}

    @cached_property
    def special_tokens(self) -> frozenset[str]:
        return frozenset(tok.content for tok in self.backend.get_added_tokens_decoder().values() if tok.special)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """What transformers passes to chat templates as keyword arguments (bos_token, eos_token...)."""
        pairs = (("bos_token", self.bos_token), ("eos_token", self.eos_token), ("pad_token", self.pad_token),
                 ("unk_token", self.unk_token))
        return {key: value for key, value in pairs if value is not None}

    def token_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        """Ids of `text` as written (no BOS added: templates write their own), added tokens matched."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    @cached_property
    def segment_encoder(self) -> "SegmentEncoder":
        """The segment encoder the renderer uses with this tokenizer (one LRU per tokenizer; its
        `cache_size` can be changed, 0 turns caching off)."""
        return SegmentEncoder(self)

    def to_transformers(self, chat_template: str | None = None):
        """A transformers PreTrainedTokenizerFast over the same backend (for apply_chat_template)."""
        from transformers import PreTrainedTokenizerFast

        kwargs = {key: value for key, value in self.special_tokens_map.items()}
        template = chat_template if chat_template is not None else self.chat_template
        if template is not None:
            kwargs["chat_template"] = template
        return PreTrainedTokenizerFast(tokenizer_object=self.backend.__class__.from_str(self.backend.to_str()),
                                       **kwargs)

    def _pipeline_config(self) -> dict[str, Any]:
        """The tokenizer.json keys `segmentable` reads: added tokens, normalizer, pre-tokenizer. Read from
        the components, not by serializing the whole tokenizer (its vocabulary makes that half a second)."""
        try:
            added = [{"lstrip": t.lstrip, "rstrip": t.rstrip, "single_word": t.single_word, "normalized": t.normalized}
                     for t in self.backend.get_added_tokens_decoder().values()]
            return {"added_tokens": added, "normalizer": _component(self.backend.normalizer),
                    "pre_tokenizer": _component(self.backend.pre_tokenizer)}
        except (AttributeError, TypeError, ValueError):  # a tokenizers version without these accessors
            return json.loads(self.backend.to_str())

    @cached_property
    def segmentable(self) -> bool:
        """Whether encoding the pieces between added tokens separately gives the ids of the whole text.
        True for byte-level BPE with a regex pre-tokenizer; not for e.g. Metaspace tokenizers that
        prepend a marker to the first piece only, nor for added tokens that strip their neighbours."""
        config = self._pipeline_config()
        for token in config.get("added_tokens") or ():
            if token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
                return False
            if token.get("normalized") and config.get("normalizer"):
                return False
        safe_normalizers = {"NFC", "NFD", "NFKC", "NFKD", "Sequence"}
        safe_pre = {"Split", "ByteLevel", "Digits", "Punctuation", "Sequence"}
        return (_types_within(config.get("normalizer"), "normalizers", safe_normalizers)
                and _types_within(config.get("pre_tokenizer"), "pretokenizers", safe_pre)
                and not _byte_level_prefix_space(config.get("pre_tokenizer")))


def _component(part: Any) -> Any:
    return None if part is None else json.loads(part.__getstate__())


def _types_within(node: Any, child_key: str, allowed: set[str]) -> bool:
    if node is None:
        return True
    if node.get("type") not in allowed:
        return False
    return all(_types_within(child, child_key, allowed) for child in node.get(child_key) or ())


def _byte_level_prefix_space(node: Any) -> bool:
    if node is None:
        return False
    if node.get("type") == "ByteLevel" and node.get("add_prefix_space"):
        return True
    return any(_byte_level_prefix_space(child) for child in node.get("pretokenizers") or ())


# --- loading by name or path -----------------------------------------------------------------------

_loaded: dict[str, Tokenizer] = {}
_load_lock = threading.Lock()
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def load_tokenizer(name_or_path: str | os.PathLike) -> Tokenizer:
    """A built-in name, a tokenizer.json, a tokenizer directory, or (network permitting) a hub id."""
    key = str(name_or_path)
    if key in BUILTIN_TOKENIZERS:
        with _load_lock:  # a built-in is built and loaded once per process
            if key not in _loaded:
                _loaded[key] = _load_builtin(key)
            return _loaded[key]
    path = Path(key).expanduser()
    if path.is_dir():
        return _load_directory(path)
    if path.is_file():
        return _load_file(path, config=_read_config(path.parent) if path.name == "tokenizer.json" else {})
    if _HUB_ID.match(key) and not key.endswith(".json"):
        return _load_hub(key)
    raise ConfigError(f"unknown tokenizer '{key}'; valid: {', '.join(BUILTIN_TOKENIZERS)}, a tokenizer.json "
                      "file, a tokenizer directory, or a hub id (org/name)", code="unknown_tokenizer")


def _load_file(path: Path, config: Mapping[str, Any], name: str | None = None) -> Tokenizer:
    data = path.read_bytes()
    try:
        backend = hf_tokenizers.Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ConfigError(f"not a tokenizer.json: {path}: {exc}", code="bad_tokenizer") from None
    template = _chat_template(config, path.parent)
    return Tokenizer(name=name or str(path), backend=backend, fingerprint=hashlib.sha256(data).hexdigest(),
                     bos_token=_token_text(config.get("bos_token")), eos_token=_token_text(config.get("eos_token")),
                     pad_token=_token_text(config.get("pad_token")), unk_token=_token_text(config.get("unk_token")),
                     chat_template=template, source=str(path))


def _load_directory(path: Path) -> Tokenizer:
    file = path / "tokenizer.json"
    if not file.is_file():
        raise ConfigError(f"tokenizer directory {path} has no tokenizer.json", code="bad_tokenizer")
    return _load_file(file, _read_config(path), name=str(path))


def _read_config(folder: Path) -> dict[str, Any]:
    config_path = folder / "tokenizer_config.json"
    if not config_path.is_file():
        return {}
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"bad tokenizer_config.json in {folder}: {exc}", code="bad_tokenizer") from None
    return config if isinstance(config, dict) else {}


def _chat_template(config: Mapping[str, Any], folder: Path) -> str | None:
    # Newer tokenizer folders keep the template in its own file.
    separate = folder / "chat_template.jinja"
    if separate.is_file():
        return separate.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        named = {item.get("name"): item.get("template") for item in template if isinstance(item, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _load_hub(repo_id: str) -> Tokenizer:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ConfigError(f"tokenizer '{repo_id}' is a hub id but HF_HUB_OFFLINE=1; valid offline: "
                          f"{', '.join(BUILTIN_TOKENIZERS)} or a local path", code="unknown_tokenizer")
    try:
        from huggingface_hub import hf_hub_download

        file = Path(hf_hub_download(repo_id, "tokenizer.json"))
        try:
            config_file = Path(hf_hub_download(repo_id, "tokenizer_config.json"))
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except Exception:  # the config is optional
            config = {}
    except Exception as exc:
        raise ConfigError(f"could not fetch tokenizer '{repo_id}' from the hub ({type(exc).__name__}); "
                          f"valid offline: {', '.join(BUILTIN_TOKENIZERS)} or a local path",
                          code="unknown_tokenizer") from None
    return _load_file(file, config, name=repo_id)


# --- segment encoding ------------------------------------------------------------------------------

_INT32 = "i" if array("i").itemsize == 4 else "l"
_INT32_NP = np.dtype(np.int32)  # native order, as array(_INT32) stores
_ZERO = array(_INT32, [0])


def _int32_le(ids: list[int]) -> bytes:
    out = array(_INT32, ids)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


class Segmented(NamedTuple):
    """Token ids of a text and what is needed to map character positions to tokens without a
    per-token table: per segment its first character and first token, and token offsets inside it."""

    ids: list[int]
    char_starts: list[int]  # first character of each segment
    token_starts: list[int]  # first token of each segment
    offsets: list[tuple[Sequence[int], Sequence[int]] | None]  # per segment (starts, ends), relative; None = one added token
    lengths: list[int]  # characters per segment
    buffer: bytes = b""  # the ids as little-endian int32 (what writers store), joined from cached pieces
    # Each token's start and end within its segment, as native int32, for `index`.
    relative_starts: bytes = b""
    relative_ends: bytes = b""
    # Answers computed in bulk by `index`, for the positions a render asks about: pos -> token.
    starting: dict[int, int] | None = None
    ending: dict[int, int] | None = None

    def index(self, positions: Iterable[int]) -> None:
        """Answer `first_token_starting_at` and `first_token_ending_after` for these positions in one
        vectorized pass (the methods then look them up). Over the whole text, the tokens' absolute
        starts and ends are sorted, so: tokens starting at or after pos = count of starts below pos;
        first ending after pos = count of ends at or below pos."""
        if self.starting is None or self.ending is None or not self.ids:
            return
        counts = np.diff(np.array([*self.token_starts, len(self.ids)], dtype=np.int64))
        base = np.repeat(np.array(self.char_starts, dtype=np.int64), counts)
        starts = np.frombuffer(self.relative_starts, dtype=_INT32_NP) + base
        ends = np.frombuffer(self.relative_ends, dtype=_INT32_NP) + base
        wanted = np.array(sorted(set(positions)), dtype=np.int64)
        keys = wanted.tolist()
        self.starting.update(zip(keys, np.searchsorted(starts, wanted, "left").tolist()))
        self.ending.update(zip(keys, np.searchsorted(ends, wanted, "right").tolist()))

    def first_token_ending_after(self, pos: int) -> int:
        """Index of the first token whose characters end after `pos` (the token holding char `pos`)."""
        if self.ending:
            found = self.ending.get(pos)
            if found is not None:
                return found
        seg = bisect_right(self.char_starts, pos) - 1
        if seg < 0:
            return 0
        table = self.offsets[seg]
        rel = pos - self.char_starts[seg]
        if table is None:
            return self.token_starts[seg] + (0 if rel < self.lengths[seg] else 1)
        return self.token_starts[seg] + bisect_right(table[1], rel)

    def first_token_starting_at(self, pos: int) -> int:
        """Index of the first token that starts at or after `pos`."""
        if self.starting:
            found = self.starting.get(pos)
            if found is not None:
                return found
        seg = bisect_right(self.char_starts, pos) - 1
        if seg < 0:
            return 0
        table = self.offsets[seg]
        rel = pos - self.char_starts[seg]
        if table is None:
            return self.token_starts[seg] + (0 if rel <= 0 else 1)
        return self.token_starts[seg] + bisect_left(table[0], rel)

    def overlapping(self, start: int, end: int) -> tuple[int, int]:
        """Token range [a, b) of every token sharing a character with [start, end)."""
        if end <= start:
            a = self.first_token_starting_at(start)
            return a, a
        return self.first_token_ending_after(start), self.first_token_starting_at(end)

    def inside(self, start: int, end: int) -> tuple[int, int]:
        """Token range [a, b) of the tokens lying wholly within [start, end)."""
        a = self.first_token_starting_at(start)
        b = self.first_token_ending_after(end)  # tokens before it end at or before `end`
        return a, max(a, b)


class SegmentEncoder:
    """Encodes text as the concatenation of independently encoded segments: every added token is its
    own segment, and the text between two added tokens is tokenized alone. Pieces that repeat across a
    dataset (system prompts, tool definitions) are served from an LRU keyed by their text, bounded both
    in entries (`cache_size`) and in tokens (`cache_tokens`, about 50 bytes each), so its memory stays
    flat whatever the input."""

    def __init__(self, tokenizer: Tokenizer, cache_size: int = 4096, cache_tokens: int = 1_000_000):
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self.cache_tokens = cache_tokens
        self.hits = 0
        self.misses = 0
        # piece -> (ids, token starts, token ends, ids as int32 bytes); offsets relative to the piece
        self._cache: OrderedDict[str, tuple[list[int], array, array, bytes]] = OrderedDict()
        self._cached_tokens = 0
        self._lock = threading.Lock()
        added = sorted(tokenizer.added_tokens, key=len, reverse=True)  # longest first = leftmost-longest
        self._split = re.compile("|".join(re.escape(t) for t in added)) if added else None
        self._segmentable = tokenizer.segmentable
        self._token_bytes = {token_id: struct.pack("<i", token_id) for token_id in tokenizer.added_tokens.values()}

    def split(self, text: str) -> list[tuple[int, int, int | None]]:
        """(start, end, id) pieces: id is the added token's id, or None for text between them."""
        pieces: list[tuple[int, int, int | None]] = []
        if self._split is None or not self._segmentable:
            return [(0, len(text), None)] if text else []
        added = self.tokenizer.added_tokens
        pos = 0
        for match in self._split.finditer(text):
            if match.start() > pos:
                pieces.append((pos, match.start(), None))
            pieces.append((match.start(), match.end(), added[match.group()]))
            pos = match.end()
        if pos < len(text):
            pieces.append((pos, len(text), None))
        return pieces

    def encode(self, text: str, pieces: list[tuple[int, int, int | None]] | None = None) -> Segmented:
        if pieces is None:
            pieces = self.split(text)
        texts = [text[a:b] for a, b, token in pieces if token is None]
        encoded = self._encode_texts(texts)
        ids: list[int] = []
        buffers: list[bytes] = []
        rel_starts: list[Any] = []
        rel_ends: list[Any] = []
        char_starts, token_starts, offsets, lengths = [], [], [], []
        token_bytes = self._token_bytes
        k = 0
        for start, end, token in pieces:
            char_starts.append(start)
            token_starts.append(len(ids))
            lengths.append(end - start)
            if token is not None:
                ids.append(token)
                offsets.append(None)
                buffers.append(token_bytes[token])
                rel_starts.append(_ZERO)
                rel_ends.append(array(_INT32, [end - start]))
            else:
                seg_ids, starts, ends, buffer = encoded[k]
                k += 1
                ids.extend(seg_ids)
                offsets.append((starts, ends))
                buffers.append(buffer)
                rel_starts.append(starts)
                rel_ends.append(ends)
        return Segmented(ids, char_starts, token_starts, offsets, lengths, b"".join(buffers), b"".join(rel_starts),
                         b"".join(rel_ends), {}, {})

    def _encode_texts(self, texts: list[str]):
        out: list[Any] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, piece in enumerate(texts):
                hit = self._cache.get(piece)
                if hit is not None:
                    self._cache.move_to_end(piece)
                    out[i] = hit
                    self.hits += 1
                else:
                    missing.setdefault(piece, []).append(i)
            self.misses += len(missing)
        if missing:
            keys = list(missing)
            encodings = self.tokenizer.backend.encode_batch(keys, add_special_tokens=False)
            with self._lock:
                for piece, encoding in zip(keys, encodings):
                    offs = encoding.offsets
                    seg_ids = encoding.ids
                    value = (seg_ids, array(_INT32, [o[0] for o in offs]), array(_INT32, [o[1] for o in offs]),
                             _int32_le(seg_ids))
                    for i in missing[piece]:
                        out[i] = value
                    if self.cache_size and 0 < len(seg_ids) <= self.cache_tokens and piece not in self._cache:
                        self._cache[piece] = value
                        self._cached_tokens += len(seg_ids)
                        self._evict()
        return out

    def limit(self, tokens: int) -> None:
        """Hold at most this many tokens from now on (0: cache nothing)."""
        with self._lock:
            self.cache_tokens = tokens
            self._evict()

    def _evict(self) -> None:
        while len(self._cache) > self.cache_size or self._cached_tokens > self.cache_tokens:
            self._cached_tokens -= len(self._cache.popitem(last=False)[1][0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._cache), "tokens": self._cached_tokens}
