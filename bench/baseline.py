"""The baseline the store benchmarks compare against: the eventsourcing library's own
aggregate, with no validation, no chain and no group commit."""

from __future__ import annotations

from eventsourcing.domain import Aggregate


class Counter(Aggregate):
    def __init__(self, label: str):
        self.label = label
        self.total = 0

    class Counted(Aggregate.Event):
        by: int

        def apply(self, agg: Counter) -> None:
            agg.total += self.by

    def count(self, by: int) -> None:
        self.trigger_event(self.Counted, by=by)
