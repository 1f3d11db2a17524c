"""README "Training with the output", run as written: the job config block, then each trainer's snippet
on that job's outputs. Python snippets run (TRL's SFTTrainer for two steps on CPU with a tiny random
model; the OpenAI SDK against a local stand-in for the API, which checks what it is sent; Together's
Parquet), configs are read and checked against what axolotl and LLaMA-Factory document, without
installing them."""

from __future__ import annotations

import email.parser
import glob
import json
import re
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from corpus import ROOT
from pipeline import run_job
from pipeline.run.config import load_config

SECTION = (ROOT / "README.md").read_text().split("\n## Training with the output\n", 1)[1].split("\n## ", 1)[0]
# Together's documented columns for tokenized Parquet (its CLI's `files check` refuses any other).
TOGETHER_COLUMNS = {"input_ids", "attention_mask", "labels", "position_ids"}


def _blocks(heading: str | None, lang: str) -> list[str]:
    text = SECTION if heading is None else SECTION.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The README's job block, on the bundled samples, run into `out/` of a fresh folder. Its 2% validation
    share would leave these 18 rows without a validation row: 30% here."""
    root = tmp_path_factory.mktemp("readme-training")
    (job,) = _blocks(None, "toml")[:1]
    (root / "job.toml").write_text(job)
    settings = {"input.paths": [str(ROOT / "data")],
                "output.dir": str(root / "out"), "output.validation": 0.3, "output.qa_report": False,
                "shape.max_tokens": 8192, "run.workers": 1}
    assert tomllib.loads(job)["export"]["formats"] == ["openai", "trl", "sharegpt"]
    run_job(load_config(root / "job.toml", settings), progress=False)
    return root


def _rows(root: Path, pattern: str) -> list[dict]:
    return [row for path in sorted(glob.glob(str(root / pattern))) for row in pq.read_table(path).to_pylist()]


def test_trl_snippets_train(workdir, monkeypatch):
    import trl

    from pipeline import load_tokenizer
    from trl_support import tiny_model
    from trl_templates import trl_template

    class TwoSteps(trl.SFTConfig):  # the snippet's config, run for two steps of one row on CPU
        def __init__(self, **kwargs):
            super().__init__(**kwargs, max_steps=2, per_device_train_batch_size=1, use_cpu=True, report_to="none",
                             save_strategy="no", gradient_checkpointing=False)

    monkeypatch.setattr(trl, "SFTConfig", TwoSteps)
    monkeypatch.chdir(workdir)
    tokenizer = load_tokenizer("qwen2.5").to_transformers(trl_template("qwen2_5.jinja"))  # as the hub's
    snippets = _blocks("TRL", "python")
    assert len(snippets) == 2
    for code in snippets:
        namespace = {"model": tiny_model(tokenizer), "tokenizer": tokenizer}
        exec(compile(code, "README.md", "exec"), namespace)
        assert namespace["trainer"].state.global_step == 2


def _check_pretokenized(path: Path) -> None:
    for row in pq.read_table(path).to_pylist():
        assert len(row["input_ids"]) == len(row["attention_mask"]) == len(row["labels"])
        assert all(label in (-100, t) for label, t in zip(row["labels"], row["input_ids"]))


def test_axolotl_configs_match_the_outputs(workdir):
    configs = [yaml.safe_load(code) for code in _blocks("axolotl", "yaml")]
    assert len(configs) == 2
    longest = max(row["num_tokens"] for row in _rows(workdir, "out/*.parquet"))
    for config in configs:
        assert config["sequence_len"] >= longest
        for entry in config["datasets"] + config.get("test_datasets", []):
            assert entry["path"] == "parquet"
            files = [workdir / name for name in entry["data_files"]]
            assert files and all(f.is_file() for f in files)
            for file in files:
                if "type" not in entry:  # pre-tokenized
                    _check_pretokenized(file)
                    continue
                assert entry["type"] == "chat_template"
                names = pq.read_schema(file).names
                assert entry["field_messages"] in names and entry["field_tools"] in names
                mapping = entry["message_property_mappings"]
                for row in pq.read_table(file).to_pylist():
                    messages = json.loads(row[entry["field_messages"]])
                    assert all(set(mapping.values()) <= set(m) for m in messages)
                    assert any(m[mapping["role"]] in entry["roles_to_train"] for m in messages)


def test_llamafactory_config_names_the_declared_datasets(workdir):
    (config,) = [yaml.safe_load(code) for code in _blocks("LLaMA-Factory", "yaml")]
    folder = workdir / config["dataset_dir"]
    info = json.loads((folder / "dataset_info.json").read_text())
    longest = max(row["num_tokens"] for row in _rows(workdir, "out/*.parquet"))
    assert config["cutoff_len"] >= longest and config["template"] == "qwen"  # LLaMA-Factory's Qwen2.5 template
    for name in (config["dataset"], config["eval_dataset"]):
        entry = info[name]
        records = [json.loads(line) for line in (folder / entry["file_name"]).read_text().splitlines()]
        assert records and all(entry["columns"]["messages"] in r for r in records)


def test_together_snippet_writes_what_together_takes(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    (code,) = _blocks("Together", "python")
    exec(compile(code, "README.md", "exec"), {})
    for split, prefix in (("train", "data"), ("validation", "validation")):
        table = pq.read_table(workdir / f"together-{split}.parquet")
        assert "input_ids" in table.schema.names and set(table.schema.names) <= TOGETHER_COLUMNS
        source = _rows(workdir, f"out/{prefix}-*.parquet")
        assert table.num_rows == len(source) >= 1
        assert table.column("labels").to_pylist() == [row["labels"] for row in source]


class _FakeOpenAI(BaseHTTPRequestHandler):
    """Files and fine-tuning jobs, as much of the API as the snippet calls; keeps what it was sent."""

    received: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/files"):
            parsed = email.parser.BytesParser().parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
            fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                      for part in parsed.get_payload()}
            file_id = f"file-{len(self.received)}"
            self.received.append(("file", file_id, fields))
            reply = {"id": file_id, "object": "file", "bytes": len(fields["file"]), "created_at": 0,
                     "filename": "upload.jsonl", "purpose": fields["purpose"].decode(), "status": "processed"}
        else:
            request = json.loads(body)
            self.received.append(("job", self.path, request))
            reply = {"id": "ftjob-1", "object": "fine_tuning.job", "created_at": 0, "model": request["model"],
                     "training_file": request["training_file"], "validation_file": request.get("validation_file"),
                     "status": "validating_files", "organization_id": "org-1", "result_files": [], "seed": 0,
                     "error": None, "fine_tuned_model": None, "finished_at": None, "trained_tokens": None,
                     "hyperparameters": {"n_epochs": "auto"}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_snippet_uploads_the_export_and_starts_a_job(workdir, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.chdir(workdir)
        (code,) = _blocks("OpenAI API", "python")
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        server.shutdown()
    (train, validation, job) = _FakeOpenAI.received
    assert train[2]["file"] == (workdir / "out" / "openai" / "train.jsonl").read_bytes()
    assert train[2]["purpose"] == validation[2]["purpose"] == b"fine-tune"
    assert validation[2]["file"] == (workdir / "out" / "openai" / "validation.jsonl").read_bytes()
    assert job[1].endswith("/fine_tuning/jobs")
    assert job[2]["training_file"] == train[1] and job[2]["validation_file"] == validation[1]
    assert namespace["job"].id == "ftjob-1"
