"""[export] formats against what each consumer documents, on every exported row of a run over the
samples, this suite's fixture and the corpus: OpenAI chat fine-tuning lines (the SDK's types made strict,
the documented rules, weights that train the turns the row trains), TRL rows, LLaMA-Factory's sharegpt
contract and dataset_info.json, axolotl's pre-tokenized contract and chat_template field mapping."""

from __future__ import annotations

import json
import re

import datasets
import pytest

import export_runs
from pipeline import load_tokenizer
from strict_types import FineTuningExample, violations


@pytest.fixture(scope="module", params=["local", "corpus"])
def out(request, tmp_path_factory):
    return export_runs.shared_run(tmp_path_factory, corpus=request.param == "corpus")


@pytest.fixture(scope="module")
def qwen():
    return load_tokenizer("qwen2.5")


def _assistant_turns_trained(row, tokenizer) -> list[bool]:
    """Per rendered assistant turn of a ChatML row, in order: does its loss mask train any token of it.
    Read off the token stream alone (`<|im_start|>assistant` ... `<|im_end|>`), not from spans."""
    header = tokenizer.backend.encode("<|im_start|>assistant", add_special_tokens=False).ids
    end = tokenizer.token_id("<|im_end|>")
    ids, mask, out = row["input_ids"], row["loss_mask"], []
    for i in range(len(ids) - 1):
        if ids[i:i + 2] == header:
            j = ids.index(end, i)
            out.append(any(mask[i:j + 1]))
    return out


def test_every_row_is_exported_or_says_why(out):
    for fmt in export_runs.FORMATS:
        pairs = export_runs.paired(out, fmt)
        assert pairs and any(record is not None for _, record in pairs)
        for row, record in pairs:
            assert (record is None) == bool(export_runs.skipped(row, fmt)), (fmt, row["source"])


def test_openai_lines_are_strict_fine_tuning_examples(out):
    for row, line in export_runs.paired(out, "openai"):
        if line is None:
            continue
        where = row["source"]
        assert violations(line, FineTuningExample) == [], where
        messages = line["messages"]
        assert any(m["role"] == "assistant" for m in messages), where  # at least one assistant message
        calls = [c for m in messages for c in m.get("tool_calls", ())]
        if calls:
            assert line.get("tools"), where  # tools present when calls are
            names = {t["function"]["name"] for t in line["tools"]}
            assert {c["function"]["name"] for c in calls} <= names, where
        answered: set[str] = set()
        for m in messages:
            assert ("weight" in m) == (m["role"] == "assistant"), where
            if m["role"] == "assistant":
                assert m.get("content") or m.get("tool_calls"), where
                for call in m.get("tool_calls", ()):
                    assert re.fullmatch(r"call_[A-Za-z0-9_-]+", call["id"]), where
                    assert isinstance(json.loads(call["function"]["arguments"]), dict), where
                    answered.add(call["id"])
            if m["role"] == "tool":
                assert m["tool_call_id"] in answered, where
        assert line.get("parallel_tool_calls", False) == any(len(m.get("tool_calls", ())) > 1 for m in messages)


def test_openai_weights_train_exactly_the_turns_the_row_trains(out, qwen):
    checked = 0
    for row, line in export_runs.paired(out, "openai"):
        if line is None:
            continue
        weights = [m["weight"] == 1 for m in line["messages"] if m["role"] == "assistant"]
        assert weights == _assistant_turns_trained(row, qwen), row["source"]
        checked += 1
    assert checked


def test_trl_rows_train_the_turns_the_row_trains(out, qwen):
    for row, record in export_runs.paired(out, "trl"):
        trained = _assistant_turns_trained(row, qwen)
        if record is None:
            assert not all(trained), row["source"]  # only a row with an untrained turn has no messages form
            continue
        assert record["messages"] == row["messages"] and record["tools"] == row["tools"]
        assert all(trained)


def test_trl_prompt_completion_when_only_the_last_turn_trains(tmp_path, qwen):
    out = export_runs.run(tmp_path, export_runs.inputs(corpus=False), **{"render.mask": "last"})
    pairs = export_runs.paired(out, "trl")
    assert pairs
    assert any(record is not None for _, record in pairs)
    for row, record in pairs:
        if record is None:  # a conversation that opens with its trained turn: no prompt to give TRL
            assert export_runs.skipped(row, "trl") == ["not exported: nothing before the trained turn: TRL needs a "
                                                       "prompt"] and row["messages"][0]["role"] == "assistant"
            continue
        assert set(record) == {"prompt", "completion", "tools"}
        assert record["prompt"] + record["completion"] == row["messages"]
        trained = _assistant_turns_trained(row, qwen)
        completion_turns = sum(m["role"] == "assistant" for m in record["completion"])
        assert all(m["role"] == "assistant" for m in record["completion"])
        assert trained[-completion_turns:] == [True] * completion_turns and not any(trained[:-completion_turns])


def test_sharegpt_records_meet_llamafactory_contract(out):
    info = json.loads((out / "sharegpt" / "dataset_info.json").read_text())
    assert sorted(info) == [f"sftprep_{split}" for split in export_runs.splits(out)]
    for name, entry in info.items():
        assert entry["formatting"] == "sharegpt" and (out / "sharegpt" / entry["file_name"]).is_file()
        assert entry["columns"] == {"messages": "conversations", "system": "system", "tools": "tools"}
    for row, record in export_runs.paired(out, "sharegpt"):
        if record is None:
            continue
        turns = record["conversations"]
        assert turns and len(turns) % 2 == 0, row["source"]
        for position, turn in enumerate(turns):
            assert set(turn) == {"from", "value"} and isinstance(turn["value"], str)
            assert turn["from"] in (("human", "observation") if position % 2 == 0 else ("gpt", "function_call"))
        tools = json.loads(record["tools"]) if record["tools"] else []
        names = {tool["name"] for tool in tools}
        assert all(isinstance(tool.get("parameters", {}), dict) for tool in tools)
        for turn in turns:
            if turn["from"] == "function_call":
                value = json.loads(turn["value"])
                for call in value if isinstance(value, list) else [value]:
                    assert set(call) == {"name", "arguments"} and isinstance(call["arguments"], dict)
                    assert call["name"] in names, row["source"]
        assert isinstance(record.get("system", ""), str)


def test_pretokenized_rows_meet_axolotl_and_together(out):
    """axolotl's pre-tokenized datasets (and Together's Parquet): input_ids, attention_mask, labels of
    one length, labels the ids or -100; here labels train exactly the loss mask."""
    for split in export_runs.splits(out):
        for row in export_runs.rows(out, split):
            ids, labels = row["input_ids"], row["labels"]
            assert len(ids) == len(row["attention_mask"]) == len(labels) == len(row["loss_mask"])
            assert set(row["attention_mask"]) == {1}
            assert labels == [t if m else -100 for t, m in zip(ids, row["loss_mask"])]


def test_messages_meet_axolotl_chat_template_mapping(out):
    """axolotl `type: chat_template` with `field_messages: messages`, `field_tools: tools` and the default
    property mapping (role, content): OpenAI-style roles, string content, calls with object arguments."""
    for row in export_runs.rows(out):
        for m in row["messages"]:
            assert m["role"] in ("system", "user", "assistant", "tool") and isinstance(m["content"], str)
            for call in m.get("tool_calls", ()):
                assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
        assert all(t["type"] == "function" and t["function"]["name"] for t in row["tools"])


def test_datasets_loads_json_values_without_merging_structs(out):
    """Calls with different argument keys keep their own keys through `datasets.load_dataset`, in the
    data shards and in the trl export (Json features declared in the Parquet schema)."""
    for files, column in ((str(out / "data-*.parquet"), "messages"), (str(out / "trl" / "train.parquet"), "messages")):
        loaded = datasets.load_dataset("parquet", data_files=files, split="train")
        assert type(loaded.features[column]).__name__ == "Json"
        written = [r["messages"] for r in export_runs.rows(out)] if "data" in files else \
            [r["messages"] for r in export_runs.records(out, "trl")]
        keys = {tuple(c["function"]["arguments"]) for ms in written for m in ms for c in m.get("tool_calls", ())}
        assert len(keys) > 1  # the run holds calls whose arguments differ in keys
        assert [row[column] for row in loaded] == written
