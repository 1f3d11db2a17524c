"""The built-in tokenizers, offline: their specs, their vocabularies from the `quicktok-v1` package's data
files, their tokenizer.json built from those, and the cache that holds it.

A built-in is built once from the package's rank table (checked against the official vocabulary's
sha256), converted with transformers' TikTokenConverter, and cached as tokenizer.json in the user cache
dir (`SFTPREP_CACHE` overrides); a cache file whose sha256 does not match its sidecar is rebuilt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import threading
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import tokenizers as hf_tokenizers

from ..errors import ConfigError
from . import _tekken

__all__ = ["BUILTIN_TOKENIZERS", "builtin_json", "builtin_ranks", "cache_dir", "tiktoken_file"]

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

# o200k's without the contractions and with single digits.
_TEKKEN_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"\p{N}",
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


def _qwen3_added() -> tuple[tuple[int, str, bool], ...]:
    # Qwen3's vocabulary is Qwen2.5's plus four non-special added tokens.
    extra = ["<tool_response>", "</tool_response>", "<think>", "</think>"]
    return _qwen_added() + tuple((151665 + i, t, False) for i, t in enumerate(extra))


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
    "qwen3": _Builtin("qwen3.vocab", "qwen.tiktoken",
                      "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
                      _QWEN_PATTERN, _qwen3_added(), nfc=True, ignore_merges=False,
                      bos=None, eos="<|im_end|>", pad="<|endoftext|>"),
    # Mistral Nemo's Tekken (v3), from mistral-common's data files.
    "mistral": _Builtin("tekken_240718.json", "",
                        "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516",
                        _TEKKEN_PATTERN,
                        _tekken.control_tokens(), nfc=False, ignore_merges=True,
                        bos="<s>", eos="</s>", pad="<pad>"),
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
    if not spec.tiktoken_name:
        raise ConfigError(f"tokenizer '{name}' has no tiktoken vocabulary file", code="unknown_tokenizer")
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
    if spec.vocab_file.startswith("tekken"):
        return _tekken.build(spec.vocab_file, spec.sha256, spec.pattern, spec.added)
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


def builtin_json(name: str) -> tuple[str, Path]:
    """The tokenizer.json text of a built-in and where it is cached (`tokenizers` wraps it)."""
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
    return text, path
