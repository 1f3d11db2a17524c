"""Mistral's Tekken vocabulary as a `tokenizers` tokenizer.json, from the tekken file that the
`mistral-common` package ships (sha256 checked): the first 1,000 ids are control tokens, the byte-level
BPE ranks follow from id 1,000, and only the first `default_vocab_size` ids are used, as Mistral's own
Tekkenizer does."""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources

from ..errors import ConfigError

# The control tokens at ids 0..19 of tekken files without a special-token list (v3); the rest of the
# 1,000 are <SPECIAL_N>.
NAMED = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
         "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
         "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]")


def control_tokens(count: int = 1000) -> tuple[tuple[int, str, bool], ...]:
    return tuple((i, NAMED[i] if i < len(NAMED) else f"<SPECIAL_{i}>", True) for i in range(count))


def read(file: str, sha256: str) -> dict:
    try:
        data = resources.files("mistral_common").joinpath("data", file).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ConfigError(f"the Mistral tokenizer needs the package mistral-common==1.13.1 ({exc})",
                          code="tokenizer_unavailable") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise ConfigError(f"mistral-common's {file} has sha256 {digest}, expected {sha256}",
                          code="tokenizer_checksum")
    return json.loads(data)


def build(file: str, sha256: str, pattern: str, added: tuple[tuple[int, str, bool], ...]) -> str:
    """tokenizer.json text for a tekken file."""
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tekken = read(file, sha256)
    config = tekken["config"]
    if config["pattern"] != pattern or config["default_num_special_tokens"] != len(added):
        raise ConfigError(f"{file}: pattern or control-token count differ from the built-in spec",
                          code="tokenizer_build")
    offset = len(added)
    used = config["default_vocab_size"] - offset
    ranks = {base64.b64decode(entry["token_bytes"]): entry["rank"] for entry in tekken["vocab"][:used]}

    class _Converter(TikTokenConverter):
        def extract_vocab_merges_from_model(self, _url):  # type: ignore[override]
            self.load_tiktoken_bpe = lambda _path: ranks  # type: ignore[method-assign]
            vocab, merges = super().extract_vocab_merges_from_model(_url)
            shifted = {token: rank + offset for token, rank in vocab.items()}
            shifted.update({content: token_id for token_id, content, _ in added})
            return shifted, merges

    backend = _Converter(vocab_file=file, pattern=pattern).converted()
    backend.model.ignore_merges = True
    backend.add_special_tokens([AddedToken(content, special=True, normalized=False) for _, content, _ in added])
    for token_id, content, _ in added[:len(NAMED)]:
        if backend.token_to_id(content) != token_id:
            raise ConfigError(f"tekken: {content} landed at id {backend.token_to_id(content)}, expected {token_id}",
                              code="tokenizer_build")
    return backend.to_str()
