"""A tiny aggregate used only by tests that need many independent writers."""

from __future__ import annotations

from agentplaza.domain.base import Context, PlazaAggregate


class Tally(PlazaAggregate):
    family = "tally"

    class Created(PlazaAggregate.Created):
        label: str

    class Counted(PlazaAggregate.Event):
        by: int

        def apply(self, tally: Tally) -> None:
            tally.total += self.by

    def __init__(self, label: str):
        self.label = label
        self.total = 0

    def count(self, ctx: Context, by: int = 1) -> None:
        self.record(self.Counted, ctx, by=by)
