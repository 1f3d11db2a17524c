"""Built-in tokenizers against tiktoken (an independent BPE over the same official vocabulary), the
tokenizer cache, local tokenizer files and directories, and segment encoding."""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from pipeline.errors import ConfigError
from pipeline.render import load_template, load_tokenizer
from pipeline.render import builtin_tokenizers as bt
from pipeline.render import tokenizers as tk
from pipeline.render.segments import SegmentEncoder

# sha256 of the official vocabulary files, from ../shared/reference/REFERENCE.md
OFFICIAL_SHA256 = {
    "qwen2.5": "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
    "qwen3": "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
    "llama3": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    "gpt-oss": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
SPECIAL_IDS = {
    "qwen2.5": {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
                "</tool_call>": 151658, "<|file_sep|>": 151664},
    "qwen3": {"<|im_start|>": 151644, "<tool_call>": 151657, "<|file_sep|>": 151664, "<tool_response>": 151665,
              "</tool_response>": 151666, "<think>": 151667, "</think>": 151668},
    "llama3": {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|finetune_right_pad_id|>": 128004,
               "<|start_header_id|>": 128006, "<|end_header_id|>": 128007, "<|eom_id|>": 128008,
               "<|eot_id|>": 128009, "<|python_tag|>": 128010, "<|reserved_special_token_0|>": 128002,
               "<|reserved_special_token_2|>": 128005, "<|reserved_special_token_247|>": 128255},
    "gpt-oss": {"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002, "<|constrain|>": 200003,
                "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008,
                "<|call|>": 200012, "<|endofprompt|>": 200018, "<|reserved_200013|>": 200013},
}
# The built-ins from quicktok's rank tables (mistral's Tekken is checked against mistral-common in test_mistral).
TIKTOKEN_BUILTINS = [name for name, spec in bt.BUILTIN_TOKENIZERS.items() if spec.vocab_file.endswith(".vocab")]
VOCAB_SIZE = {"qwen2.5": 151665, "qwen3": 151669, "llama3": 128256, "gpt-oss": 201088}

MIXED = [
    "Hello, world! How's it going? I'm fine; they'll see.",
    "naïve café, ÅNGSTRÖM, straße, œuvre",
    "日本語のテキストと漢字、カタカナ。",
    "中文分词测试：你好，世界！",
    "Привет, мир! Ёлка 12345678901234567890",
    "العربية: مرحبا بالعالم",
    "हिन्दी और ক্ষ বাংলা",
    "emoji 😀👍🏽 👨‍👩‍👧 flags 🇫🇷",
    "   leading spaces\n\n\ttabs\r\nwindows\n\n\n",
    "def f(x):\n    return x ** 2  # comment\n\nclass A:\n\tpass",
    '{"name": "get_weather", "arguments": {"city": "Zürich", "n": 3.14e-10}}',
    "a/b/c/d\n/path/to/file.py:12:3",
    "ABCdefGHI jklMNO pqRS TUvw",
    "e\u0301 combining accent (not NFC)",
    "x" * 300 + " " + "ab" * 200,
    "1,234,567.89 $100 €5 ¥1000 ⅔ ½ ²³",
]


def _specials(name: str) -> dict[str, int]:
    return {content: token_id for token_id, content, _ in bt.BUILTIN_TOKENIZERS[name].added}


@pytest.fixture(scope="module")
def reference():
    """tiktoken Encodings over the written vocabulary files, read by tiktoken's own parser with its sha256
    check (TIKTOKEN_CACHE_DIR="" makes it read the file, not its global cache)."""
    encodings: dict[str, tiktoken.Encoding] = {}
    patch = pytest.MonkeyPatch()
    patch.setenv("TIKTOKEN_CACHE_DIR", "")

    def get(name: str) -> tiktoken.Encoding:
        if name not in encodings:
            ranks = load_tiktoken_bpe(str(bt.tiktoken_file(name)), expected_hash=OFFICIAL_SHA256[name])
            encodings[name] = tiktoken.Encoding(f"ref-{name}", pat_str=bt.BUILTIN_TOKENIZERS[name].pattern,
                                                mergeable_ranks=ranks, special_tokens=_specials(name))
        return encodings[name]

    yield get
    patch.undo()


@pytest.mark.parametrize("name", TIKTOKEN_BUILTINS)
def test_ids_equal_tiktoken_on_mixed_strings(name, reference):
    tok = load_tokenizer(name)
    enc = reference(name)
    specials = list(_specials(name))
    strings = MIXED + [f"{specials[1]}user\n{MIXED[2]}{specials[2]} x{specials[0]}{specials[-1]}",
                       "".join(specials[:6]) + " tail"]
    for text in strings:
        expected_input = unicodedata.normalize("NFC", text) if bt.BUILTIN_TOKENIZERS[name].nfc else text
        assert tok.encode(text) == enc.encode(expected_input, allowed_special="all"), text
        assert tok.decode(tok.encode(text)) == expected_input


@pytest.mark.parametrize("name", TIKTOKEN_BUILTINS)
def test_vocabulary_is_the_official_one_and_special_ids_are_right(name):
    path = bt.tiktoken_file(name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == OFFICIAL_SHA256[name]
    tok = load_tokenizer(name)
    for content, token_id in SPECIAL_IDS[name].items():
        assert tok.token_id(content) == token_id
        assert tok.encode(content) == [token_id]
    assert tok.backend.get_vocab_size(with_added_tokens=True) == VOCAB_SIZE[name]
    if name == "qwen2.5":
        assert "<tool_call>" not in tok.special_tokens and "<|im_end|>" in tok.special_tokens
        assert tok.token_id("<tool_response>") is None  # Qwen3 only
    assert len(tok.fingerprint) == 64


def test_cache_hit_rebuild_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("SFTPREP_CACHE", str(tmp_path))
    built = []
    original_build = bt._build

    def counting_build(name, spec):
        built.append(name)
        return original_build(name, spec)

    monkeypatch.setattr(bt, "_build", counting_build)
    first = tk._load_builtin("llama3")
    assert built == ["llama3"]
    files = list(tmp_path.glob("tokenizers/llama3-*/tokenizer.json"))
    assert len(files) == 1 and (tmp_path / "vocab" / "llama3.tiktoken").is_file()

    second = tk._load_builtin("llama3")  # cache hit: no build
    assert built == ["llama3"] and second.fingerprint == first.fingerprint

    files[0].write_text(files[0].read_text()[:-200] + "garbage")  # corrupt: sha256 no longer matches
    third = tk._load_builtin("llama3")
    assert built == ["llama3", "llama3"] and third.fingerprint == first.fingerprint
    assert third.encode("Hello world<|eot_id|>") == [9906, 1917, 128009]

    (tmp_path / "vocab" / "llama3.tiktoken").write_bytes(b"tampered")  # a bad vocabulary file is rewritten
    assert hashlib.sha256(bt.tiktoken_file("llama3").read_bytes()).hexdigest() == OFFICIAL_SHA256["llama3"]


def test_unknown_tokenizer_lists_valid_names(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="valid: qwen2.5, qwen3, mistral, llama3, gpt-oss"):
        load_tokenizer("qwen-2.5-typo")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):
        load_tokenizer("Qwen/Qwen2.5-7B-Instruct")


def test_local_file_and_directory_with_chat_template(tmp_path):
    qwen = load_tokenizer("qwen2.5")
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(qwen.backend.to_str())
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": template, "eos_token": {"content": "<|im_end|>"}, "bos_token": None}))
    from_dir = load_tokenizer(folder)
    assert from_dir.chat_template == template and from_dir.eos_token == "<|im_end|>" and from_dir.bos_token is None
    assert from_dir.encode("<|im_start|>user\nhi") == qwen.encode("<|im_start|>user\nhi")
    from_file = load_tokenizer(folder / "tokenizer.json")
    assert from_file.fingerprint == from_dir.fingerprint
    assert load_template("tokenizer", from_dir).source == template
    with pytest.raises(ConfigError, match="not a tokenizer.json"):
        bad = tmp_path / "bad.json"
        bad.write_text("{}")
        load_tokenizer(bad)
    with pytest.raises(ConfigError, match="needs a tokenizer that ships a chat template"):
        load_template("tokenizer", qwen)


# --- segment encoding ------------------------------------------------------------------------------

_QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<|endoftext|>"]
_pieces = st.one_of(st.text(max_size=40), st.sampled_from(_QWEN_SPECIALS),
                    st.sampled_from(["\n", " ", "  \n", "user\n", "'s", "ab<|im_", "|>"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_pieces, max_size=12))
def test_segmented_encoding_equals_whole_text(parts):
    qwen = load_tokenizer("qwen2.5")
    text = "".join(parts)
    encoder = SegmentEncoder(qwen, cache_size=16)
    segmented = encoder.encode(text)
    whole = qwen.backend.encode(text, add_special_tokens=False)
    assert segmented.ids == whole.ids
    # char -> token mapping agrees with the whole-text offsets
    for i, (start, end) in enumerate(whole.offsets):
        assert segmented.first_token_ending_after(start) <= i < segmented.first_token_starting_at(end) or start == end


def test_segment_cache_hits_and_bound():
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen, cache_size=2)
    system = "<|im_start|>system\nYou are a long, repeated system prompt.<|im_end|>\n"
    for k in range(3):
        encoder.encode(system + f"<|im_start|>user\nquestion {k}<|im_end|>\n")
    stats = encoder.stats()
    assert stats["entries"] <= 2 and stats["hits"] >= 2


def test_non_segmentable_tokenizer_falls_back_to_whole_text():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    # Metaspace prepends "▁" to the first piece only: encoding pieces apart would differ.
    backend = HFTokenizer(models.WordLevel({"▁a": 0, "a": 1, "▁": 2, "[UNK]": 3, "<s>": 4}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    backend.decoder = decoders.Metaspace()
    backend.add_special_tokens(["<s>"])
    tok = tk.Tokenizer(name="tiny", backend=backend, fingerprint="x")
    assert not tok.segmentable
    text = "a<s>a"
    assert SegmentEncoder(tok).encode(text).ids == backend.encode(text, add_special_tokens=False).ids
    assert load_tokenizer("qwen2.5").segmentable
