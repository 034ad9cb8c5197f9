"""The Library's commands (see ``domain.library``): an item handed in, an item deleted."""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.library import LIBRARY_ID, Item, Library, item_id, item_number
from .unit import Commands, Done, Unit


def load(cmds: Commands, number: str) -> Item:
    number = item_number(number)
    item = Unit(cmds.store).get(item_id(number))
    if item is None or item.deleted:
        raise Refusal("no_item", f"no library item {number}")
    return item


def load_any(cmds: Commands, number: str) -> Item:
    """An item as the log holds it, deleted or not."""
    item = Unit(cmds.store).get(item_id(item_number(number)))
    if item is None:
        raise Refusal("no_item", f"no library item {number}")
    return item


def next_number(cmds: Commands) -> str:
    """The number the next item will most likely get (its bytes are stored under it first)."""
    lib = Unit(cmds.store).get(LIBRARY_ID)
    return f"d{(lib.count if lib is not None else 0) + 1}"


def submit(cmds: Commands, ctx: Context, **fields) -> Done[str]:
    def decide(unit: Unit) -> str:
        lib = unit.get(LIBRARY_ID) or Library.open(ctx)
        number = lib.next_number(ctx)
        unit.add(lib, Item.submit(ctx, number, **fields))
        return number

    return cmds.run(decide)


def delete(cmds: Commands, ctx: Context, number: str) -> Done[Item]:
    def decide(unit: Unit) -> Item:
        n = item_number(number)
        item = unit.get(item_id(n))
        if item is None:
            raise Refusal("no_item", f"no library item {n}")
        item.delete(ctx)
        unit.add(item)
        return item

    return cmds.run(decide)
