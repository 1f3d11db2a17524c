"""Helpers shared by the render tests: the hand-written canonical fixtures, goldens, official template hashes."""

from __future__ import annotations

from pathlib import Path

from pipeline.conversation import Conversation, from_json

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = Path(__file__).parent / "goldens"

# sha256 of the official templates inside trl 1.16.0 (see ../shared/reference/REFERENCE.md).
OFFICIAL = {
    "qwen2_5.jinja": "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f",
    "qwen2_5_training.jinja": "0cd86fb80f520885e35040a8df321540e729d3358da41f27cf74d33103d94f62",
    "llama3_1.jinja": "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65",
    "llama3_2.jinja": "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4",
    "gptoss.jinja": "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146",
    "gptoss_training.jinja": "6adda7cea0f63ef14918be7f26100b324525b6185a8f06932914388ffaa52e32",
}


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def load_fixture(name: str) -> Conversation:
    return from_json((FIXTURES / f"{name}.json").read_bytes())
