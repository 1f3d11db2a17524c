"""TRL's own SFTTrainer (CPU, a tiny random model) trains exactly sftprep's loss mask: on the Parquet rows
(pre-tokenized: their labels as they are) and on the `trl` export (messages + tools with
`assistant_only_loss`, or prompt + completion when `mask = "last"`), row by row over TRL's prepared
dataset and the batches of two training steps. The one difference, named: trl's training template also
trains the newline after `<|im_end|>` (and, in messages rows, the one after `<|im_start|>assistant`),
which sftprep leaves untrained as scaffolding."""

from __future__ import annotations

import os

import datasets
import pytest

import export_runs
from trl_support import RecordingTrainer, config, qwen_tokenizer, tiny_model, trained

MAX_TOKENS = 8192
TRAIN_STEP_TOKENS = 1024  # the two training steps run on rows this short (logits: tokens x 151k vocabulary)


@pytest.fixture(scope="module")
def tokenizer():
    return qwen_tokenizer()


_RUNS: dict = {}


def _run(tmp_path_factory, mask: str):
    if mask not in _RUNS:
        _RUNS[mask] = _fresh_run(tmp_path_factory, mask)
    return _RUNS[mask]


def _fresh_run(tmp_path_factory, mask: str):
    paths = export_runs.inputs(corpus=False)
    if export_runs.corpus_available() or os.environ.get("CI") == "true":
        export_runs.require_corpus()
        paths += [str(export_runs.CORPUS / name) for name in ("tau_bench_gpt4o_airline", "pydantic_ai_openai_chat")]
    out = tmp_path_factory.mktemp(f"trl-{mask}")
    return export_runs.run(out, paths, **{"render.mask": mask, "shape.max_tokens": MAX_TOKENS, "output.validation": 0,
                                          "export.formats": ["trl"], "run.workers": 2})


def _newline_differences(ids, ours, theirs, tokenizer) -> list[int]:
    """Positions TRL trains and sftprep does not that are not the named newlines."""
    newline, im_end = tokenizer.convert_tokens_to_ids("Ċ"), tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = tokenizer.encode("<|im_start|>assistant", add_special_tokens=False)
    other = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a == b:
            continue
        after_end = i > 0 and ids[i - 1] == im_end
        after_header = i >= 2 and ids[i - 2:i] == header
        if not (a == 0 and b == 1 and ids[i] == newline and (after_end or after_header)):
            other.append(i)
    return other


def _train_and_check(trainer, rows, tokenizer, exact: bool) -> None:
    prepared = trainer.train_dataset
    assert len(prepared) == len(rows)  # TRL dropped no row (max_length holds every row)
    for row, example in zip(rows, prepared):
        assert example["input_ids"] == row["input_ids"], row["source"]
        theirs = trained(example["labels"])
        if exact:
            assert theirs == row["loss_mask"], row["source"]
        else:
            assert _newline_differences(row["input_ids"], row["loss_mask"], theirs, tokenizer) == [], row["source"]
    short = [i for i, row in enumerate(rows) if len(row["input_ids"]) <= TRAIN_STEP_TOKENS]
    trainer.train_dataset = prepared.select(short)
    trainer.train()
    assert trainer.state.global_step == 2 and len(trainer.seen) == 2
    by_ids = {tuple(row["input_ids"]): row for row in rows}
    for ids, labels in trainer.seen:
        row = by_ids[tuple(ids)]
        ours, theirs = row["loss_mask"], trained(labels)
        assert theirs == ours if exact else not _newline_differences(ids, ours, theirs, tokenizer)


@pytest.mark.parametrize("mask", ["all", "last"])
def test_trl_trains_the_parquet_rows_loss_mask(tmp_path_factory, tmp_path, tokenizer, mask):
    out = _run(tmp_path_factory, mask)
    rows = export_runs.rows(out)
    data = datasets.load_dataset("parquet", data_files=str(out / "data-*.parquet"), split="train")
    trainer = RecordingTrainer(model=tiny_model(tokenizer), args=config(str(tmp_path), MAX_TOKENS),
                               train_dataset=data, processing_class=tokenizer)
    _train_and_check(trainer, rows, tokenizer, exact=True)


@pytest.mark.parametrize("mask", ["all", "last"])
def test_trl_trains_the_trl_export_as_the_rows(tmp_path_factory, tmp_path, tokenizer, mask):
    out = _run(tmp_path_factory, mask)
    pairs = export_runs.paired(out, "trl")
    rows = [row for row, record in pairs if record is not None]
    assert len(rows) == len(pairs) - sum(bool(export_runs.skipped(row, "trl")) for row, _ in pairs) and rows
    data = datasets.load_dataset("parquet", data_files=str(out / "trl" / "train.parquet"), split="train")
    args = config(str(tmp_path), MAX_TOKENS, assistant_only_loss=mask == "all")
    trainer = RecordingTrainer(model=tiny_model(tokenizer), args=args, train_dataset=data, processing_class=tokenizer)
    _train_and_check(trainer, rows, tokenizer, exact=False)
