"""The society against a real hub: agents' messages make bonds, their ratings are listed (with
whether each counts), the owner's Trust more / Trust less moves reputation from "unrated" with no
shared work, the CLI's society table is the guide's, and a refusal changes nothing."""

from __future__ import annotations

import pytest
from support.agentside import AgentSide
from support.hubproc import cli, ok

from agentplaza.commands import conversations, society
from agentplaza.domain.base import Refusal


def at(c) -> int:
    return c.get("/v1/hub").json()["projections_at"]


def test_bonds_ratings_and_the_owners_trust(hub):
    with hub.client() as c, AgentSide(hub) as side:
        a, b, d = [x["cid"] for x in ok(c.post("/v1/agents", json={"role": "builder", "count": 3}))["agents"]]
        side._settled(conversations.send(side.cmds, side.ctx(a), b, "Pair on t1?"))
        bonds = ok(c.get("/v1/society/bonds"))["bonds"]
        assert [(x["a"], x["b"], x["strength"], x["interactions"]) for x in bonds] == [(a, b, 1.0, 1)]
        assert ok(c.get("/v1/society/bonds", params={"cid": d}))["bonds"] == []
        got = side._settled(society.rate(side.cmds, side.ctx(a), a, b, "great"))
        assert got["counts"] is True
        with pytest.raises(Refusal) as e:
            society.rate(side.cmds, side.ctx(a), a, b, "great")  # once per interaction
        assert e.value.code == "nothing_to_rate"
        with pytest.raises(Refusal) as e:
            society.rate(side.cmds, side.ctx(a), a, d, "good")  # never dealt with
        assert e.value.code == "nothing_to_rate"
        (rating,) = ok(c.get("/v1/society/ratings"))["ratings"]
        assert (rating["by"], rating["of"], rating["rating"], rating["counts"]) == (a, b, "great", True)
        opinions = ok(c.get("/v1/society/opinions", params={"cid": b}))["opinions"]
        assert [(o["by"], o["of"]) for o in opinions] == [(a, b)]

        table = cli(hub, "society", "reputation")
        assert table.returncode == 0 and table.stdout.count("unrated") == 3, table.stdout
        r = cli(hub, "society", "rate", str(d), "up")
        assert r.returncode == 0 and r.stdout.strip() == f"trust more for agent {d}; reputation now 93", r.stdout
        rows = {x["cid"]: x for x in ok(c.get("/v1/society/reputation"))["agents"]}
        assert rows[d]["reputation"] == 93 and rows[a]["reputation"] == "unrated"
        down = ok(c.post(f"/v1/society/{d}/trust", json={"more": False}))
        assert down["trust"] == "less" and down["agent"]["reputation"] == 50
        kinds = {e["data"]["kind"] for e in ok(c.get("/v1/events", params={"kinds": "society"}))["events"]}
        assert {"Bond.Created", "Bond.Interacted", "Bond.Rated", "Society.OwnerRated"} <= kinds

        before = at(c)
        for path, body, status, code in (("/v1/society/99/trust", {"more": True}, 404, "unknown_agent"),
                                         ("/v1/society/x/trust", {"more": True}, 422, "invalid_cid"),
                                         (f"/v1/society/{d}/trust", {"more": "yes"}, 422, None)):
            r = c.post(path, json=body)
            assert r.status_code == status, r.text
            if code:
                assert r.json()["error"]["code"] == code
        assert at(c) == before
        for words in (("roles",), ("wallets",), ("bonds",), ("ratings",), ("proposals",), ("bonds", "--cid", str(a))):
            r = cli(hub, "society", *words)
            assert r.returncode == 0, (words, r.stderr)
        assert "orchestrator" in cli(hub, "society", "roles").stdout
        assert "great" in cli(hub, "society", "ratings").stdout
