"""The owner's payment threshold and outreach interval against a real hub: ``GET/PATCH /v1/settings`` and
``agentplaza settings`` (a bad value is refused and changes nothing), and ``agentplaza society hires``."""

from __future__ import annotations

from support.hubproc import cli, ok


def test_the_owner_sets_approve_over_through_the_route_and_the_cli(hub):
    with hub.client() as c:
        assert ok(c.get("/v1/settings")) == {"payments": {"approve_over": 500}, "society": {"outreach_minutes": 20}}
        assert ok(c.patch("/v1/settings", json={"payments": {"approve_over": 0}}))["payments"] == {"approve_over": 0}
        r = c.patch("/v1/settings", json={"payments": {"approve_over": -1}})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_value"
        r = c.patch("/v1/settings", json={"payments": {"approve_over": "9"}})  # strict: a number, not text
        assert r.status_code in (400, 422), r.text
        r = c.patch("/v1/settings", json={"payments": {"approve_over": 0, "extra": 1}})
        assert r.status_code in (400, 422), r.text
        assert ok(c.get("/v1/settings"))["payments"] == {"approve_over": 0}
        r = c.patch("/v1/settings", json={"society": {"outreach_minutes": -5}})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_value"
        both = ok(c.patch("/v1/settings", json={"payments": {"approve_over": 600}, "society": {"outreach_minutes": 0}}))
        assert both == {"payments": {"approve_over": 600}, "society": {"outreach_minutes": 0}}  # 0: outreach off
        r = c.patch("/v1/settings", json={})
        assert r.status_code in (400, 422) and r.json()["error"]["code"] == "invalid_request"
    off = cli(hub, "settings", "set", "society.outreach_minutes", "30")
    assert off.returncode == 0 and off.stdout.split("\n")[1].split() == ["society.outreach_minutes", "30"], off.stderr
    shown = cli(hub, "settings", "set", "payments.approve_over", "750")
    assert shown.returncode == 0 and shown.stdout.split("\n")[0].split() == ["payments.approve_over", "750"], shown.stderr
    again = cli(hub, "settings", "set", "payments.approve_over", "750")
    assert again.returncode == 1 and "no_change" in again.stderr
    assert "750" in cli(hub, "settings").stdout
    hires = cli(hub, "society", "hires")
    assert hires.returncode == 0 and hires.stdout == "(none)\n", hires.stderr  # no agent hired anyone yet


def test_the_toolbox_routes_and_cli(hub):
    with hub.client() as c:
        assert ok(c.get("/v1/toolbox")) == {"discoveries": []}
        r = c.post("/v1/toolbox/d1/flag", json={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "no_discovery"
        r = c.delete("/v1/toolbox/d1")
        assert r.status_code == 404 and r.json()["error"]["code"] == "no_discovery"
    shown = cli(hub, "toolbox")
    assert shown.returncode == 0 and shown.stdout == "(none)\n", shown.stderr
    gone = cli(hub, "toolbox", "remove", "d1", "--yes")
    assert gone.returncode == 1 and "no_discovery" in gone.stderr


def test_the_owner_reads_an_agents_memory(hub):
    with hub.client() as c:
        cid = ok(c.post("/v1/agents", json={"role": "builder", "count": 1}))["agents"][0]["cid"]
        assert ok(c.get(f"/v1/agents/{cid}/memory")) == {"cid": cid, "notes": []}
        assert ok(c.get(f"/v1/agents/{cid}/memory", params={"note": "Warnings"})) == {"cid": cid, "note": None}
        r = c.get(f"/v1/agents/{cid}/memory", params={"note": "!!"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_name"
    shown = cli(hub, "agents", "memory", str(cid))
    assert shown.returncode == 0 and shown.stdout == "(none)\n", shown.stderr
