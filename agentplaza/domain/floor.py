"""The robots on the floor: "The plaza deals each agent a species the first time it sees the agent,
choosing among the species that the fewest agents use, so the floor stays varied. The orchestrator is
always the rover, Treads." The species are only a look.

- ``Floor`` (one): which species each CID was dealt. A deal is an event (``Floor.Dealt``), made in the
  spawn's (or fork's) own commit, so the floor is the same after a restart and in a replay, whatever
  the code's list of species becomes later.

Rules of a deal, in the order ``species_for`` applies them:

1. The orchestrator is always ``ORCHESTRATOR_SPECIES`` (Treads, the rover), which no worker is dealt.
2. Any other agent gets the species of ``WORKER_SPECIES`` that the fewest CIDs hold now; a tie goes to
   the first in the list. A CID a deleted agent freed is dealt anew for its new agent.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from .base import Context, PlazaAggregate, fixed_id

FLOOR_ID = fixed_id("floor")
#: The rover is the orchestrator's alone; the others are dealt to workers (``console/js/screens/floor.js``
#: draws each).
ORCHESTRATOR_SPECIES = "treads"
WORKER_SPECIES = ("biped", "hover", "spider", "boxy", "arm")


def species_for(role: str, held: dict[str, str]) -> str:
    """The species for a new agent of ``role``, given what each CID holds now (``{cid: species}``)."""
    if role == "orchestrator":
        return ORCHESTRATOR_SPECIES
    used = {s: 0 for s in WORKER_SPECIES}
    for s in held.values():
        if s in used:
            used[s] += 1
    return min(WORKER_SPECIES, key=lambda s: (used[s], WORKER_SPECIES.index(s)))


class Floor(PlazaAggregate):
    family = "agent"

    class Created(PlazaAggregate.Created):
        pass

    class Dealt(PlazaAggregate.Event):
        cid: int
        species: str

        def apply(self, f: Floor) -> None:
            f.held[str(self.cid)] = self.species

    def __init__(self) -> None:
        self.held: dict[str, str] = {}

    @classmethod
    def open(cls, ctx: Context) -> Floor:
        return cls.start(ctx, id=FLOOR_ID)

    def deal(self, ctx: Context, cid: int, role: str) -> str:
        others = {k: v for k, v in self.held.items() if k != str(cid)}
        species = species_for(role, others)
        self.record(self.Dealt, ctx, cid=cid, species=species)
        return species
