"""The robots on the floor, on SQLite and PostgreSQL: "The plaza deals each agent a species the first time
it sees the agent, choosing among the species that the fewest agents use ... The orchestrator is always
the rover, Treads." A deal is an event, so the floor is the same after a restart and when the read
models are rebuilt from event 1."""

from __future__ import annotations

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.domain.floor import ORCHESTRATOR_SPECIES, WORKER_SPECIES, species_for
from agentplaza.projections.agents import roster


def floor(hub) -> dict[int, str]:
    hub.read_models.catch_up()
    return {a["cid"]: a["species"] for a in roster(hub.read_models)}


def test_the_fewest_used_species_is_dealt_and_the_orchestrator_is_always_treads():
    assert species_for("orchestrator", {"3": ORCHESTRATOR_SPECIES}) == ORCHESTRATOR_SPECIES
    assert species_for("builder", {}) == WORKER_SPECIES[0]
    held = {str(i): s for i, s in enumerate(WORKER_SPECIES[:3])}
    assert species_for("tester", held) == WORKER_SPECIES[3]
    assert species_for("tester", {**held, "9": WORKER_SPECIES[3], "10": WORKER_SPECIES[4]}) == WORKER_SPECIES[0]
    assert ORCHESTRATOR_SPECIES not in WORKER_SPECIES  # the rover is never a worker's


def test_a_deal_is_an_event_kept_across_restarts_and_rebuilds(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    try:
        owner = hub.commands.context("owner")
        orch = ac.spawn(hub.commands, owner, "orchestrator", 1).value[0]
        builders = ac.spawn(hub.commands, owner, "builder", 6).value
        shown = floor(hub)
        assert shown[orch] == ORCHESTRATOR_SPECIES
        assert [shown[c] for c in builders] == [*WORKER_SPECIES, WORKER_SPECIES[0]]  # the fewest used first
        ac.delete(hub.commands, owner, builders[1])
        again = ac.spawn(hub.commands, owner, "tester", 1).value[0]
        assert floor(hub)[again] == WORKER_SPECIES[1]  # biped is held twice: the first of the least used
        live = floor(hub)
        hub.read_models.rebuild()
        assert floor(hub) == live
    finally:
        hub.close()
    restarted = Hub.open(folders, database_url=database_url)
    try:
        assert floor(restarted) == live
    finally:
        restarted.close()
