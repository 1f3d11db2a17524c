"""Grouping parsed items into canonical messages: consecutive items of one side extend one message,
and a message item's layout goes on its first block."""

from __future__ import annotations

from msgspec import structs

from ...conversation import Message, Opaque
from .items import NAME, slot

class Group:
    """The canonical message being assembled from consecutive items of one side."""

    __slots__ = ("role", "blocks", "form")

    def __init__(self, role: str) -> None:
        self.role = role
        self.blocks: list = []
        self.form: dict = {}

    def message(self) -> Message:
        return Message(role=self.role, blocks=tuple(self.blocks), form=slot(self.form))  # type: ignore[arg-type]

    def add_content(self, blocks: list, layout: dict, item_extras: dict, opaque_at: list[int]) -> None:
        """Append one message item's parts, putting the item's layout on its first block."""
        offset = len(self.blocks)
        if opaque_at:
            self.form.setdefault("parts", []).extend(offset + i for i in opaque_at)
        if not blocks:
            if item_extras:
                layout = {**layout, "x": item_extras}
            self.form.setdefault("empty", []).append([offset, layout])
            return
        first = blocks[0]
        if isinstance(first, Opaque):
            if item_extras:
                layout = {**layout, "x": item_extras}
            self.form.setdefault("item_at", {})[str(offset)] = layout
        else:
            form = dict(first.form.get(NAME) or {})
            form["item"] = layout
            changes: dict = {"form": {NAME: form}}
            if item_extras:
                changes["extras"] = {NAME: {**(first.extras.get(NAME) or {}), **item_extras}}
            blocks[0] = structs.replace(first, **changes)
        self.blocks.extend(blocks)


class Messages:
    """The messages built so far, and the open group that consecutive items of its side extend."""

    __slots__ = ("messages", "open", "extendable")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.open: Group | None = None
        self.extendable = False

    def group(self, side: str | None, role: str) -> Group:
        """The open group when it is of `side`; else a new one (`side` None: a message of its own)."""
        if side is not None and self.extendable and self.open is not None and self.open.role == side:
            return self.open
        if self.open is not None:
            self.messages.append(self.open.message())
        self.open = Group(role)
        self.extendable = side is not None
        return self.open

    def finish(self) -> list[Message]:
        if self.open is not None:
            self.messages.append(self.open.message())
            self.open = None
        return self.messages
