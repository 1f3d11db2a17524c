"""TRL conversational rows that make SFTTrainer train the turns the row trains. Every assistant turn
trained (`mask = "all"`, no `weight: 0`): `messages` + `tools`, for `assistant_only_loss=True`. Only the
final assistant turns trained (`mask = "last"`): `prompt` + `completion`, which TRL trains as the
completion. Any other pattern (an untrained turn between trained ones) has no TRL form: not exported."""

from __future__ import annotations

from typing import Any

from ...ledger import Ledger
from .chat import Chat
from .openai import Skip

TARGET = "trl export"


def line(chat: Chat, ledger: Ledger) -> dict[str, Any]:
    assistants = [i for i, m in enumerate(chat.messages) if m.get("role") == "assistant"]
    trained = [i for i in assistants if chat.trained[i]]
    if not trained:
        raise Skip("no trained assistant turn")
    if chat.mask.turns == "all":
        if trained != assistants:
            raise Skip("an assistant turn is not trained (weight 0): messages rows train every assistant turn")
        return {"messages": chat.messages, "tools": chat.tools}
    start = trained[0]
    if start == 0:
        raise Skip("nothing before the trained turn: TRL needs a prompt")
    if any(not chat.trained[i] for i in range(start, len(chat.messages))):
        raise Skip("the trained turns are not the end of the conversation: a completion would train what follows")
    return {"prompt": chat.messages[:start], "completion": chat.messages[start:], "tools": chat.tools}
