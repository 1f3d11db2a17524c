"""The fast tokenizer engines against HF tokenizers: for every built-in tokenizer and engine, equal ids
and offsets on arbitrary unicode with the added tokens among it (hypothesis), on every string of the
corpus, and on rendered corpus conversations (ids and masks); the self-check and the running check
catching an engine that differs; `auto` keeping HF, and saying why, where no engine can stand in."""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import CORPUS, params, require_corpus, tau_bench_trajectories
from pipeline.errors import ConfigError, SftprepError
from pipeline.formats import parse
from pipeline.render import load_template, load_tokenizer, render
from pipeline.render.builtin_tokenizers import BUILTIN_TOKENIZERS
from pipeline.render import fast_tokenizer
from pipeline.render.builtin_tokenizers import builtin_json
from pipeline.render.fast_tokenizer import (ENGINES, FastEncoder, TokenizerDisagreement, byte_lengths,
                                            choose_backend, hf_encode, load_engine, prefetch_engine, self_check)
from pipeline.render.segments import SegmentEncoder
from pipeline.run import load_config
from pipeline.run.render_stage import Renderer

BUILTINS = list(BUILTIN_TOKENIZERS)  # every built-in, those added later included
PAIRS = [(name, engine) for name in BUILTINS for engine in ENGINES]
# The built-ins each engine is known to reproduce exactly (a regression if either stops).
KNOWN_EXACT = {"qwen2.5", "llama3", "gpt-oss"}


@functools.cache
def _fast_tokenizer(name: str, engine: str):
    """A copy of the built-in (its own segment encoder, uncached) on the engine, checking every piece
    against HF; None when the engine cannot serve this tokenizer exactly (then `auto` must keep HF for
    it: tested below). One per tokenizer and engine: loading an engine takes seconds."""
    tok = dataclasses.replace(load_tokenizer(name))
    tok.segment_encoder.cache_size = 0
    try:
        tok.segment_encoder.use_backend(engine, check_every=1)
    except ConfigError:
        assert name not in KNOWN_EXACT, f"{engine} no longer reproduces {name}"
        return None
    return tok


def _encoder(name: str, engine: str) -> SegmentEncoder | None:
    tok = _fast_tokenizer(name, engine)
    return None if tok is None else tok.segment_encoder


def _same_as_hf(encoder: SegmentEncoder, text: str) -> None:
    tok = encoder.tokenizer
    fast = encoder.encode(text)
    reference = SegmentEncoder(tok, cache_size=0).encode(text)
    assert fast.ids == reference.ids == tok.backend.encode(text, add_special_tokens=False).ids
    assert fast.offsets == reference.offsets
    assert fast.buffer == reference.buffer
    assert (fast.relative_starts, fast.relative_ends) == (reference.relative_starts, reference.relative_ends)


# --- the choice ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILTINS)
def test_auto_takes_an_engine_only_where_it_passes_and_says_which(name):
    encoder, note = choose_backend(load_tokenizer(name), "auto", 100)
    if encoder is None:
        assert name not in KNOWN_EXACT
        assert "auto keeps HF tokenizers" in note
    else:
        assert encoder.name in ENGINES and encoder.name in note and "self-check passed" in note


def test_hf_backend_uses_no_engine():
    encoder = SegmentEncoder(load_tokenizer("qwen2.5"))
    assert "HF" in encoder.use_backend("hf") and encoder.fast is None


@functools.cache
def _slightly_wrong_engine():
    text = load_tokenizer("qwen2.5").backend.to_str()
    rule = r"|\\s+(?!\\S)"
    assert text.count(rule) == 1
    return load_engine("fastokens", text.replace(rule, ""))


def _slightly_wrong(check_every: int) -> FastEncoder:
    """A real engine over Qwen's tokenizer, but with whitespace runs split as one piece (without the
    `\\s+(?!\\S)` rule that leaves the last space to the next word): the same ids on single spaces,
    others on runs of them."""
    qwen = load_tokenizer("qwen2.5")
    return FastEncoder(_slightly_wrong_engine(), "qwen2.5", qwen.backend, byte_lengths(qwen.backend), "NFC",
                       check_every)


def test_an_engine_that_implements_another_tokenizer_fails_the_self_check():
    qwen = load_tokenizer("qwen2.5")
    wrong = _slightly_wrong(1)
    with pytest.raises(TokenizerDisagreement) as caught:
        self_check(wrong, qwen)
    assert repr(caught.value.text) in str(caught.value)
    assert caught.value.fast != caught.value.reference


def test_the_running_check_stops_with_the_text_and_samples_one_piece_in_n():
    wrong = _slightly_wrong(1)
    wrong.encode(["hello", " world"])  # single spaces: the same ids
    with pytest.raises(TokenizerDisagreement) as caught:
        wrong.encode(["fine", "a   b"])
    assert caught.value.text == "a   b" and "'a   b'" in str(caught.value)
    assert wrong.checked == 4
    sampled = _slightly_wrong(50)
    sampled.encode([f" word{i}" for i in range(5000)])  # correct pieces: none raises
    assert 50 <= sampled.checked <= 150 and sampled.encoded == 5000
    # Not a bad record (those are rejects): a bug that stops the run, whole across the worker pipe.
    assert not isinstance(caught.value, SftprepError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.text, again.fast, again.reference) == (caught.value.text, caught.value.fast, caught.value.reference)


def test_explicit_engine_that_cannot_serve_the_tokenizer_is_a_config_error():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    from pipeline.render.tokenizers import Tokenizer

    backend = HFTokenizer(models.WordLevel({"▁a": 0, "a": 1, "▁": 2, "[UNK]": 3, "<s>": 4}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    backend.decoder = decoders.Metaspace()
    backend.add_special_tokens(["<s>"])
    tiny = Tokenizer(name="tiny", backend=backend, fingerprint="x")
    encoder, note = choose_backend(tiny, "auto", 100)
    assert encoder is None and "auto keeps HF tokenizers" in note and "independently" in note
    with pytest.raises(ConfigError, match="cannot use tokenizer engine fastokens"):
        choose_backend(tiny, "fastokens", 100)


def test_config_names_the_valid_backends_and_the_renderer_applies_it():
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"render.tokenizer_backend": "fasttok"})
    assert "tokenizer_backend" in str(caught.value)
    renderer = Renderer(load_config(None, {"render.tokenizer_backend": "hf"}).render)
    assert renderer.tokenizer.segment_encoder.fast is None
    default = Renderer(load_config(None, {}).render)
    assert default.tokenizer.segment_encoder.fast is not None  # auto, and qwen2.5 passes
    default.tokenizer.segment_encoder.use_backend("hf", 100)  # leave the shared tokenizer as found


def _build_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("sftprep-build-")]


def test_the_engine_built_while_hf_loads_is_the_one_chosen_and_no_build_outlives_the_choice(tmp_path):
    path = tmp_path / "tokenizer.json"  # not the cached built-in: this load is new
    path.write_text(builtin_json("qwen2.5")[0], encoding="utf-8")
    tok = load_tokenizer(path, engine="fastokens")
    build = fast_tokenizer._builds[("fastokens", tok.fingerprint)]
    encoder, note = choose_backend(tok, "auto", 100)
    assert encoder is not None and encoder.engine is build.engine and "fastokens" in note
    assert encoder.encode(["hello world"])[0][0] == tok.backend.encode("hello world").ids
    # Chosen otherwise (HF), the build is still waited for: the local engine forks single-threaded only.
    again = load_tokenizer(path, engine="fastokens")
    assert choose_backend(again, "hf", 100)[0] is None
    assert not _build_threads() and not [key for key in fast_tokenizer._builds if key[1] == tok.fingerprint]


def test_a_build_that_fails_is_the_config_error_a_direct_load_gives(monkeypatch):
    class Broken:
        def __init__(self, tokenizer_json):
            raise ValueError("no such model type")

    monkeypatch.setitem(ENGINES, "broken", Broken)
    prefetch_engine("broken", "{}", "fingerprint-of-nothing")
    with pytest.raises(ConfigError, match="broken cannot load this tokenizer: no such model type"):
        load_engine("broken", "{}", "fingerprint-of-nothing")
    assert not _build_threads()


# --- equality --------------------------------------------------------------------------------------

def _added(name: str) -> list[str]:
    return sorted(load_tokenizer(name).added_tokens)[:40]


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
_bits = st.one_of(_text, st.sampled_from([" ", "\n", "  \n\n", "\t", "123456", "'s", "ab<|", "|>", "é", "e\u0301",
                                          "😀", "中文", "x" * 50]))


@pytest.mark.parametrize(("name", "engine"), PAIRS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arbitrary_unicode_and_added_tokens_give_hf_ids_and_offsets(name, engine, data):
    encoder = _encoder(name, engine)
    if encoder is None:
        return
    parts = data.draw(st.lists(st.one_of(_bits, st.sampled_from(_added(name))), max_size=10))
    _same_as_hf(encoder, "".join(parts))


def _corpus_strings() -> list[str]:
    """Every string value in every JSON record of the corpus (texts, arguments, tool results, ids)."""
    found: dict[str, None] = {}

    def walk(value):
        if isinstance(value, str):
            found.setdefault(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                found.setdefault(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(CORPUS.rglob("*")):
        if path.suffix == ".json":
            walk(json.loads(path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    walk(json.loads(line))
    return [s for s in found if s]


@pytest.mark.parametrize(("name", "engine"), PAIRS)
def test_every_corpus_string_gives_hf_ids_and_offsets(name, engine):
    require_corpus()
    encoder = _encoder(name, engine)
    if encoder is None:
        pytest.skip(f"{engine} cannot serve {name}; auto keeps HF for it (tested above)")
    pieces, reference = _corpus_reference(name)
    assert len(pieces) > 1000
    assert encoder.fast.encode(pieces, check=False) == reference


@functools.cache
def _corpus_reference(name: str) -> tuple[list[str], list]:
    """The corpus strings split at the tokenizer's added tokens, and HF's ids and offsets for them."""
    tok = load_tokenizer(name)
    split = SegmentEncoder(tok).split
    pieces = list(dict.fromkeys(text[a:b] for text in _corpus_strings() for a, b, token in split(text)
                                if token is None))
    return pieces, hf_encode(tok.backend, pieces)


_FAMILY = {"qwen2.5": "chatml", "llama3": "llama3", "gpt-oss": "harmony"}


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("name", sorted(_FAMILY))
@pytest.mark.parametrize("traj", params(tau_bench_trajectories()[::12]))
def test_rendered_corpus_has_the_same_ids_and_masks(traj, name, engine):
    usual, fast = load_tokenizer(name), _fast_tokenizer(name, engine)
    if fast is None:
        pytest.skip(f"{engine} cannot serve {name}; auto keeps HF for it (tested above)")
    template = load_template(_FAMILY[name])
    conv = parse(traj, "openai-chat")
    a, b = render(conv, template, usual), render(conv, template, fast)
    assert a.input_ids == b.input_ids and a.loss_mask == b.loss_mask and a.spans == b.spans
    assert fast.segment_encoder.fast.checked > 0


def test_choosing_a_backend_starts_no_thread_pool(tmp_path):
    """The parent chooses (and self-checks) before it forks the workers: a thread pool started then
    (HF's encode_batch starts one) can leave a forked worker hanging in its next encode."""
    import os
    import subprocess
    import sys

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc to count threads")
    script = ("import os\nfrom pipeline.render import load_tokenizer\nfrom pipeline.render.segments import "
              "SegmentEncoder\ntok = load_tokenizer('qwen2.5'); tok.added_tokens; tok.segmentable\n"
              "before = len(os.listdir('/proc/self/task'))\nencoder = SegmentEncoder(tok)\n"
              "encoder.use_backend('auto', 1)\nencoder.encode('<|im_start|>user\\nhi there<|im_end|>\\n')\n"
              "assert encoder.fast is not None\nprint(before, len(os.listdir('/proc/self/task')))\n")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true"}
    env.pop("FASTOKENS_BPE_THREADS", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    assert after == before
