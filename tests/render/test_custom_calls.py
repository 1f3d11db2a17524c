"""Custom (free-form) tools, such as Codex's `apply_patch`: their calls carry free text, where every
built-in template writes a JSON object. Each family writes the text as the string field `input` and the
tool as a function taking it, as the Anthropic and Gemini codecs do, ledgered as folded; the call is
trained, and parse-back returns it in that form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import formats
from pipeline.conversation import CUSTOM_INPUT, custom_input_schema
from pipeline.render import check_roundtrip, load_template, load_tokenizer, render

PATCH = "*** Begin Patch\n*** Update File: a.py\n-foo = 1\n+bar = \"1\"\n*** End Patch\n"
BODY = {"model": "gpt-5", "instructions": "You are a coding agent.", "tools": [
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch to files in the repository.",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"}},
    {"type": "function", "name": "shell", "description": "Run a command.",
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}],
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Rename foo to bar in a.py"}]},
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Renamed."}]}]}

FAMILIES = ["chatml", "qwen3", "llama3", "harmony", "mistral"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_custom_call_is_its_text_as_the_input_field_trained_and_parsed_back(family):
    conv = formats.parse(BODY, "openai-responses")
    template = load_template(family)
    tokenizer = load_tokenizer(template.family.default_tokenizer)
    rendered = render(conv, template, tokenizer)
    folded = {e.path for e in rendered.ledger if e.kind == "folded" and "custom tool 'apply_patch'" in e.reason}
    assert folded == {"$.tools[0]", "$.messages[1].blocks[0]"}
    # The patch's text, JSON-escaped as a string value, lies in trained tokens.
    escaped = json.dumps(PATCH)[1:-1]
    at = rendered.text.index(escaped)
    call = [s for s in rendered.spans if s.message == 1 and s.block == 0 and s.kind == "tool_call"]
    assert call and call[0].char_start <= at < at + len(escaped) <= call[0].char_end
    assert all(rendered.loss_mask[call[0].token_start:call[0].token_end])
    parsed = check_roundtrip(conv, rendered, template, tokenizer)
    calls = [b for m in parsed.messages for b in m.blocks if type(b).__name__ == "ToolCall"]
    assert [(c.name, c.arguments) for c in calls] == [("apply_patch", {CUSTOM_INPUT: PATCH})]
    assert [t.parameters for t in parsed.tools if t.name == "apply_patch"] == [custom_input_schema()]


def test_codex_windows_with_apply_patch_are_written_by_a_run(tmp_path):
    # A Codex rollout whose agent patched files with the freeform tool: every window is a training row.
    from pipeline import load_config, run_job

    rollout = Path(__file__).resolve().parents[2] / "data" / "sessions" / "codex_rollout.jsonl"
    lines = [json.loads(line) for line in rollout.read_text(encoding="utf-8").splitlines() if line.strip()]
    meta = next(i for i, line in enumerate(lines) if line.get("type") == "session_meta")
    turn = [{"type": "response_item", "timestamp": "2025-10-01T10:00:0%dZ" % k, "payload": payload} for k, payload in
            enumerate([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Rename it"}]},
                       {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
                       {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done!"},
                       {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Renamed."}]}])]
    path = tmp_path / "rollout-patch.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines[:meta + 1] + turn) + "\n", encoding="utf-8")
    result = run_job(load_config(None, {"input.paths": [str(path)], "output.dir": str(tmp_path / "out"),
                                        "output.qa_report": False}))
    assert (result.stats.read, result.stats.written, result.stats.rejected) == (1, 1, 0)
