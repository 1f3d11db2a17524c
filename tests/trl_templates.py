"""The chat templates inside the installed trl 1.16.0 (official Qwen2.5 and Llama 3.1, trl's training copy
of Qwen2.5 with `{% generation %}`), each checked against its sha256 (../shared/reference/REFERENCE.md)."""

from __future__ import annotations

import hashlib
from importlib import resources

SHA256 = {
    "qwen2_5.jinja": "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f",
    "llama3_1.jinja": "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65",
    "qwen2_5_training.jinja": "0cd86fb80f520885e35040a8df321540e729d3358da41f27cf74d33103d94f62",
}


def trl_template(name: str) -> str:
    data = resources.files("trl").joinpath("chat_templates", name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256[name], f"trl's {name} is not the reference file"
    return data.decode("utf-8")
