"""Provider-native call items (local_shell_call, shell_call, ...) and their outputs stay together: an output
that answers one, even as a function_call_output (how Codex CLI answers local_shell_call), is native too,
so it is neither an orphan result nor written without its call in another format."""

from __future__ import annotations

import copy

from formats.accept_openai_chat import check_request as chat_accepts
from pipeline import formats
from pipeline.conversation import Opaque, ToolResult
from pipeline.validate import validate

SHELL = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls1", "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "env": {}, "working_directory": "/w"}}
BODY = {"model": "codex-mini-latest", "tools": [{"type": "local_shell"}], "input": [
    {"role": "user", "content": "List the files."},
    SHELL,
    {"type": "function_call_output", "call_id": "call_ls1", "output": "a.py\n"},
    {"role": "assistant", "content": "One file: a.py."}]}


def test_an_output_answering_a_native_call_is_native_and_no_orphan():
    conv = formats.parse(copy.deepcopy(BODY), "openai-responses")
    output = conv.messages[2].blocks[0]
    assert isinstance(output, Opaque) and output.role_hint == "result" and output.payload["call_id"] == "call_ls1"
    assert "orphan_result" not in {i.code for i in validate(conv)}
    body, ledger = formats.serialize(conv, "openai-responses")
    assert body == BODY and not ledger


def test_another_format_gets_neither_the_call_nor_its_output():
    conv = formats.parse(copy.deepcopy(BODY), "openai-responses")
    body, ledger = formats.serialize(conv, "openai-chat")
    assert body["messages"] == [{"role": "user", "content": "List the files."},
                                {"role": "assistant", "content": "One file: a.py."}]
    assert chat_accepts(body) == []
    said = {(e.path, e.reason) for e in ledger}
    shell = "openai-responses item 'local_shell_call' has no equivalent in openai-chat"
    assert ("$.messages[1].blocks[0]", shell) in said
    assert ("$.messages[2]", "nothing in this message can be written in Chat Completions") in said


def test_a_function_call_output_answering_a_function_call_is_still_a_result():
    body = copy.deepcopy(BODY)
    body["input"][1] = {"type": "function_call", "call_id": "call_ls1", "name": "shell", "arguments": "{}"}
    conv = formats.parse(body, "openai-responses")
    assert isinstance(conv.messages[2].blocks[0], ToolResult) and conv.messages[2].blocks[0].call_id is not None
