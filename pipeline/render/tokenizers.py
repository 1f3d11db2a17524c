"""The Tokenizer the renderer uses (a `tokenizers.Tokenizer` and the facts it needs), and loading one.

`load_tokenizer(name_or_path)` accepts a built-in name (`qwen2.5`, `llama3`, `gpt-oss`; built offline by
`builtin_tokenizers`), a local `tokenizer.json`, a tokenizer directory (its `tokenizer_config.json` may
carry a chat template), or a hub id where the network allows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

import tokenizers as hf_tokenizers

from ..errors import ConfigError
from .builtin_tokenizers import BUILTIN_TOKENIZERS, builtin_json, quiet_transformers
from .fast_tokenizer import prefetch_engine
from .segments import SegmentEncoder

__all__ = ["Tokenizer", "load_tokenizer"]


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
        quiet_transformers()
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


def load_tokenizer(name_or_path: str | os.PathLike, *, engine: str | None = None) -> Tokenizer:
    """A built-in name, a tokenizer.json, a tokenizer directory, or (network permitting) a hub id.
    `engine`: a fast engine (`fast_tokenizer.ENGINES`) to start building from the same tokenizer.json
    while HF tokenizers parses it; `choose_backend` takes it when it picks that engine."""
    key = str(name_or_path)
    if key in BUILTIN_TOKENIZERS:
        with _load_lock:  # a built-in is built and loaded once per process
            if key not in _loaded:
                _loaded[key] = _load_builtin(key, engine)
            return _loaded[key]
    path = Path(key).expanduser()
    if path.is_dir():
        return _load_directory(path, engine)
    if path.is_file():
        return _load_file(path, config=_read_config(path.parent) if path.name == "tokenizer.json" else {},
                          engine=engine)
    if _HUB_ID.match(key) and not key.endswith(".json"):
        return _load_hub(key, engine)
    raise ConfigError(f"unknown tokenizer '{key}'; valid: {', '.join(BUILTIN_TOKENIZERS)}, a tokenizer.json "
                      "file, a tokenizer directory, or a hub id (org/name)", code="unknown_tokenizer")


def _load_builtin(name: str, engine: str | None = None) -> Tokenizer:
    text, path = builtin_json(name)
    spec = BUILTIN_TOKENIZERS[name]
    fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if engine is not None:
        prefetch_engine(engine, text, fingerprint)
    backend = hf_tokenizers.Tokenizer.from_str(text)
    return Tokenizer(name=name, backend=backend, fingerprint=fingerprint,
                     bos_token=spec.bos, eos_token=spec.eos, pad_token=spec.pad, source=str(path))


def _load_file(path: Path, config: Mapping[str, Any], name: str | None = None, engine: str | None = None) -> Tokenizer:
    data = path.read_bytes()
    fingerprint = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
        if engine is not None:
            prefetch_engine(engine, text, fingerprint)
        backend = hf_tokenizers.Tokenizer.from_str(text)
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ConfigError(f"not a tokenizer.json: {path}: {exc}", code="bad_tokenizer") from None
    template = _chat_template(config, path.parent)
    return Tokenizer(name=name or str(path), backend=backend, fingerprint=fingerprint,
                     bos_token=_token_text(config.get("bos_token")), eos_token=_token_text(config.get("eos_token")),
                     pad_token=_token_text(config.get("pad_token")), unk_token=_token_text(config.get("unk_token")),
                     chat_template=template, source=str(path))


def _load_directory(path: Path, engine: str | None = None) -> Tokenizer:
    file = path / "tokenizer.json"
    if not file.is_file():
        raise ConfigError(f"tokenizer directory {path} has no tokenizer.json", code="bad_tokenizer")
    return _load_file(file, _read_config(path), name=str(path), engine=engine)


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


def _load_hub(repo_id: str, engine: str | None = None) -> Tokenizer:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ConfigError(f"tokenizer '{repo_id}' is a hub id but HF_HUB_OFFLINE=1; valid offline: "
                          f"{', '.join(BUILTIN_TOKENIZERS)} or a local path", code="unknown_tokenizer")
    from huggingface_hub import hf_hub_download

    offline = _hub_unreachable()
    if offline:  # no retries against a hub that cannot answer: the cached copy, if any, or the error now
        try:
            file = Path(hf_hub_download(repo_id, "tokenizer.json", local_files_only=True))
        except Exception:
            raise ConfigError(f"tokenizer '{repo_id}' is a hub id, the hub cannot be reached ({offline}) and it "
                              f"is not in the hub cache; valid offline: {', '.join(BUILTIN_TOKENIZERS)} or a local "
                              "path", code="unknown_tokenizer") from None
        return _load_file(file, _cached_config(repo_id), name=repo_id, engine=engine)
    try:
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
    return _load_file(file, config, name=repo_id, engine=engine)


def _hub_unreachable() -> str | None:
    """Why the hub cannot be reached (a failed name lookup or connection, within 3 s), or None."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname or "", url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=3).close()
    except OSError as exc:
        return f"{url.hostname}: {exc.strerror or type(exc).__name__}"
    return None


def _cached_config(repo_id: str) -> dict:
    from huggingface_hub import hf_hub_download

    try:
        return json.loads(Path(hf_hub_download(repo_id, "tokenizer_config.json", local_files_only=True))
                          .read_text(encoding="utf-8"))
    except Exception:  # the config is optional
        return {}
