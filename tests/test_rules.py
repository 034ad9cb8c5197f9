"""The laws in the hub: rule changes and decisions as events, the read models, /v1/rules and the CLI."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from support.hubproc import HubProcess, cli

import jhrl
from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands import laws as law_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Refusal
from agentplaza.domain.laws import LAWBOOK_ID, LawBook, recorded_args
from agentplaza.domain.refusals import Kind
from agentplaza.events.store import EventStore

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NO_GIT = 'law no-git "No git for builders" {\n  statement "Builders leave git alone."\n  forbid plaza_git\n  when role == builder\n}\n'
BROKEN = 'law broken "Broken" {\n  statement "x"\n  forbidd plaza_git\n}\n'
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def api(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.close()


@pytest.fixture
def cmds(folders):
    store = EventStore.open(state_dir=folders.state)
    now = [T0]
    c = Commands(store, clock=lambda: now[0])
    yield c
    store.close()


def owner(c: Commands, reason: str | None = None):
    return c.context("owner", reason)


def decide(c, agent="a1", role="builder", tool="plaza_git", risk="write", **args):
    return c.post("/v1/rules/decide", json={"agent": agent, "role": role, "tool": tool, "risk": risk, "args": args})


def position(c) -> int:
    return c.get("/v1/hub").json()["position"]


# -- decisions are events -------------------------------------------------------------------


def test_a_decision_is_an_event_with_what_check_needs_and_no_secret(cmds):
    call = jhrl.Call(role="builder", action="plaza_git", risk="write",
                     args={"host": "github.com", "api_key": "sk-live-123", "content": "x" * 10, "own": True})
    d = law_commands.decide_call(cmds, call, "cid-7").value
    assert d.decision.effect == "allow" and d.digest == call.digest()
    [rec] = [r for r in cmds.store.read() if r.kind == "ToolCall.CallDecided"]
    data = rec.data
    assert (rec.actor, data["agent"], data["role"], data["tool"], data["risk"]) == ("agent:cid-7", "cid-7", "builder", "plaza_git", "write")
    assert data["digest"] == call.digest() and data["decision"] == "allow" and data["why"] == "permitted"
    assert data["args"] == {"host": "github.com", "own": True}  # no secret, nothing no law reads
    assert "sk-live-123" not in str(rec)
    assert data["violation"] is False and data["forbidding"] is None and data["enforcement"] is None


def test_recorded_args_keep_plain_values_laws_read_and_never_secret_names():
    kept = recorded_args({"host": "h", "bonus": 600, "password": "p", "token": "t", "note": "n",
                          "path": "x" * 1000, "port": 443, "leased": True, "nested": {"a": 1}}, {"note", "nested"})
    assert kept == {"host": "h", "bonus": 600, "note": "n", "port": 443, "leased": True}


def test_a_forbid_is_a_violation_with_its_law_enforcement_and_severity(cmds):
    d = law_commands.decide_call(cmds, jhrl.Call(role="builder", action="plaza_vault_read", risk="read"), "a1").value
    assert d.decision.effect == "deny" and d.decision.forbidding == "C-002a"
    [rec] = [r for r in cmds.store.read() if r.kind == "ToolCall.CallDecided"]
    assert (rec.data["violation"], rec.data["enforcement"], rec.data["severity"]) == (True, "preventive", "critical")


def test_default_deny_is_refused_but_not_misconduct(cmds):
    d = law_commands.decide_call(cmds, jhrl.Call(role="reviewer", action="engine.edit", risk="write"), "a1").value
    assert (d.decision.effect, d.decision.reason, d.decision.violation) == ("deny", "default_deny", False)


def test_decisions_follow_rule_changes_at_once(cmds):
    call = jhrl.Call(role="builder", action="plaza_git", risk="write")
    assert law_commands.decide_call(cmds, call, "a1").value.decision.allowed
    draft = law_commands.change(cmds, owner(cmds), "add", title="no git", source=NO_GIT).value
    assert draft.rule_id == "R1"
    d = law_commands.decide_call(cmds, call, "a1").value
    assert d.decision.forbidding == "no-git" and d.lawbook_version == 2
    law_commands.change(cmds, owner(cmds), "disable", rule_id="R1")
    assert law_commands.decide_call(cmds, call, "a1").value.decision.allowed


def test_a_second_hub_on_the_same_store_decides_with_the_new_laws(folders):
    a, b = EventStore.open(state_dir=folders.state), EventStore.open(state_dir=folders.state)
    try:
        ca, cb = Commands(a), Commands(b)
        call = jhrl.Call(role="builder", action="plaza_git", risk="write")
        assert law_commands.decide_call(cb, call, "a1").value.decision.allowed
        law_commands.change(ca, owner(ca), "add", title="no git", source=NO_GIT)
        assert law_commands.decide_call(cb, call, "a1").value.decision.refused
        law_commands.change(ca, owner(ca), "delete", rule_id="no-git")
        assert law_commands.decide_call(cb, call, "a1").value.decision.allowed
    finally:
        a.close()
        b.close()


# -- rule changes are events ----------------------------------------------------------------


def test_the_law_book_rebuilds_from_its_events(cmds):
    law_commands.change(cmds, owner(cmds), "add", title="no git", source=NO_GIT)
    law_commands.change(cmds, owner(cmds, "the forge is down"), "disable", rule_id="S-006a")
    law_commands.change(cmds, owner(cmds), "replace", rule_id="R1", title="no git at all",
                        source=NO_GIT.replace("\n  when role == builder", ""))
    kinds = [r.kind for r in cmds.store.read() if r.family == "rules"]
    assert kinds == ["LawBook.Created", "LawBook.RuleAdded", "LawBook.StatuteDisabled", "LawBook.RuleReplaced"]
    disabled = [r for r in cmds.store.read() if r.kind == "LawBook.StatuteDisabled"][0]
    assert (disabled.data["law_id"], disabled.reason) == ("S-006a", "the forge is down")
    with cmds.store.fresh():
        book: LawBook = cmds.store.get(LAWBOOK_ID)
    assert book.book.disabled_statutes() == {"S-006a": "the forge is down"}
    assert [(r.id, r.title) for r in book.book.rules()] == [("R1", "no git at all")]
    assert "S-006a" not in book.lawset and "no-git" in book.lawset


def test_save_is_atomic_a_broken_rule_changes_nothing(cmds):
    law_commands.change(cmds, owner(cmds), "add", title="no git", source=NO_GIT)
    before = cmds.store.max_position()
    with pytest.raises(Refusal) as e:
        law_commands.change(cmds, owner(cmds), "add", title="two laws", source=NO_GIT.replace("no-git", "ok") + BROKEN)
    assert e.value.code == "jhrl_syntax" and (e.value.line, e.value.column) == (8, 9)
    assert e.value.kind is Kind.INVALID and "line 8, column 9" in e.value.message
    with pytest.raises(Refusal) as e:  # the same id twice cannot stand together
        law_commands.change(cmds, owner(cmds), "add", title="again", source=NO_GIT)
    assert e.value.code == "jhrl_compile"
    assert cmds.store.max_position() == before
    assert [r.id for r in law_commands.book_in_force(cmds).rules()] == ["R1"]


def test_a_statute_needs_a_reason_and_the_constitution_cannot_be_disabled(cmds):
    for reason, code in [(None, "reason_required"), ("   ", "reason_required")]:
        with pytest.raises(Refusal) as e:
            law_commands.change(cmds, owner(cmds, reason), "disable", rule_id="S-006a")
        assert e.value.code == code and e.value.kind is Kind.INVALID
    with pytest.raises(Refusal) as e:
        law_commands.change(cmds, owner(cmds, "because"), "disable", rule_id="C-002a")
    assert e.value.code == "constitutional"
    with pytest.raises(Refusal) as e:
        law_commands.change(cmds, owner(cmds), "delete", rule_id="S-006a")
    assert e.value.code == "builtin_law"
    assert cmds.store.max_position() == 0
    law_commands.change(cmds, owner(cmds, "testing the forge"), "disable", rule_id="S-006a")
    assert law_commands.book_in_force(cmds).disabled_statutes() == {"S-006a": "testing the forge"}
    law_commands.change(cmds, owner(cmds), "enable", rule_id="S-006a")
    assert law_commands.book_in_force(cmds).disabled_statutes() == {}
    with pytest.raises(Refusal) as e:
        law_commands.change(cmds, owner(cmds), "enable", rule_id="S-006a")
    assert e.value.code == "already_enabled"


# -- the API --------------------------------------------------------------------------------


def test_rules_list_show_and_counts(api):
    laws = api.get("/v1/rules").json()
    assert len(laws["laws"]) == 80 and laws["totals"]["calls"] == 0
    for _ in range(3):
        assert decide(api, tool="plaza_vault_list", risk="read").json()["decision"]["forbidding"] == "C-002a"
    assert decide(api).json()["decision"]["effect"] == "allow"
    rows = {r["id"]: r for r in api.get("/v1/rules").json()["laws"]}
    assert rows["C-002a"]["refused"] == 3 and rows["S-006a"]["refused"] == 0
    totals = api.get("/v1/rules").json()["totals"]
    assert (totals["calls"], totals["refused"], totals["allowed"], totals["violations"]) == (4, 3, 1, 3)
    one = api.get("/v1/rules/C-002a").json()
    assert one["title"] == "No credential seeking" and one["refused"] == 3 and one["origin"] == "builtin"
    assert jhrl.parse(one["text"])[0].id == "C-002a"
    r = api.get("/v1/rules/NOPE")
    assert r.status_code == 404 and r.json()["error"]["code"] == "rule_not_found"
    assert api.get("/v1/overview").json()["rules"]["violations"] == 3


def test_add_show_disable_enable_delete_over_http(api):
    r = api.post("/v1/rules", json={"title": "no git", "source": NO_GIT})
    assert r.status_code == 201 and r.json()["id"] == "R1" and r.json()["warnings"] == []
    shown = api.get("/v1/rules/R1").json()
    assert shown["kind"] == "rule" and shown["source"] == NO_GIT and shown["laws"][0]["id"] == "no-git"
    assert decide(api).json()["decision"]["forbidding"] == "no-git"
    assert api.post("/v1/rules/R1/disable", json={}).status_code == 200
    assert api.get("/v1/rules/no-git").json()["enabled"] is False
    assert decide(api).json()["decision"]["effect"] == "allow"
    r = api.post("/v1/rules/R1/disable", json={})
    assert r.status_code == 409 and r.json()["error"]["code"] == "already_disabled"
    assert api.post("/v1/rules/no-git/enable", json={}).status_code == 200
    assert decide(api).json()["decision"]["effect"] == "deny"
    r = api.put("/v1/rules/R1", json={"title": "no git for reviewers", "source": NO_GIT.replace("builder", "reviewer")})
    assert r.status_code == 200 and decide(api).json()["decision"]["effect"] == "allow"
    assert api.delete("/v1/rules/R1").status_code == 200
    r = api.get("/v1/rules/R1")
    assert r.status_code == 404
    assert api.post("/v1/rules", json={"title": "again", "source": NO_GIT}).json()["id"] == "R2"  # never reused


def test_a_broken_rule_is_refused_with_line_and_column_and_writes_nothing(api):
    before = position(api)
    r = api.post("/v1/rules", json={"title": "broken", "source": BROKEN})
    err = r.json()["error"]
    assert r.status_code == 422 and err["code"] == "jhrl_syntax" and (err["line"], err["column"]) == (3, 9)
    assert err["message"].startswith("line 3, column 9: ")
    r = api.post("/v1/rules", json={"title": "", "source": NO_GIT})
    assert r.status_code == 422 and r.json()["error"]["code"] == "bad_title"
    r = api.post("/v1/rules", json={"title": "x", "source": 'law C-9 "mine" {\n statement "s"\n permit *\n}'})
    assert r.status_code == 422 and r.json()["error"]["code"] == "jhrl_compile"
    r = api.post("/v1/rules", json={"title": "x", "source": NO_GIT, "extra": 1})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert position(api) == before and api.get("/v1/rules").json()["rules"] == []


def test_statute_disable_needs_a_reason_over_http(api):
    r = api.post("/v1/rules/S-006a/disable", json={})
    assert r.status_code == 422 and r.json()["error"]["code"] == "reason_required"
    r = api.post("/v1/rules/C-001/disable", json={"reason": "why not"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "constitutional"
    assert api.post("/v1/rules/S-006a/disable", json={"reason": "the forge is down"}).status_code == 200
    row = api.get("/v1/rules/S-006a").json()
    assert (row["enabled"], row["reason"]) == (False, "the forge is down")
    assert api.get("/v1/rules").json()["disabled"] == {"S-006a": "the forge is down"}
    r = api.delete("/v1/rules/S-006a")
    assert r.status_code == 409 and r.json()["error"]["code"] == "builtin_law"
    assert api.post("/v1/rules/S-006a/enable", json={}).status_code == 200
    assert api.get("/v1/rules/S-006a").json()["enabled"] is True


def test_save_warns_of_a_shadowed_rule_and_one_that_matches_no_tool(api):
    shadowed = 'law vault-ok "Vault for builders" {\n  statement "s"\n  permit plaza_vault_read\n}\n'
    r = api.post("/v1/rules", json={"title": "vault", "source": shadowed})
    assert r.status_code == 201 and [w["code"] for w in r.json()["warnings"]] == ["shadowed"]
    assert "C-002a" in r.json()["warnings"][0]["message"]
    nothing = 'law typo "Typo" {\n  statement "s"\n  forbid plaza_gti\n}\n'
    r = api.post("/v1/rules", json={"title": "typo", "source": nothing})
    assert [w["code"] for w in r.json()["warnings"]] == ["no_known_tool"]


def test_explain_says_why_and_why_not(api):
    before = position(api)
    r = api.post("/v1/rules/explain", json={"role": "reviewer", "tool": "engine.edit"})
    x = r.json()
    assert x["decision"]["effect"] == "deny" and x["decision"]["reason"] == "default_deny"
    s006a = [p for p in x["permits"] if p["law"] == "S-006a"][0]
    assert not s006a["matched"] and "the call has role = reviewer" in s006a["failed"][0]
    assert "not misconduct" in x["summary"] and x["lines"][0] == x["summary"]
    x = api.post("/v1/rules/explain", json={"role": "builder", "tool": "plaza_vault_read"}).json()
    assert x["forbids"] == [{"law": "C-002a", "title": "No credential seeking"}]
    x = api.post("/v1/rules/explain", json={"role": "builder", "tool": "engine.edit", "mode": "ask"}).json()
    assert x["decision"]["effect"] == "ask"
    r = api.post("/v1/rules/explain", json={"role": "builder", "tool": "engine.edit", "risk": "huge"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert position(api) == before  # explain records nothing


def test_infractions_newest_first_with_limit(api):
    decide(api, agent="a1", tool="plaza_vault_list", risk="read")
    decide(api, agent="a2", role="orchestrator", tool="plaza_agent_spawn")
    decide(api, agent="a3", role="reviewer", tool="engine.edit")  # default deny: not an infraction
    rows = api.get("/v1/rules/infractions").json()["infractions"]
    assert [(r["agent"], r["law_id"]) for r in rows] == [("a2", "C-005"), ("a1", "C-002a")]
    assert rows[0]["tool"] == "plaza_agent_spawn" and rows[0]["at"]
    assert len(api.get("/v1/rules/infractions", params={"limit": 1}).json()["infractions"]) == 1
    r = api.get("/v1/rules/infractions", params={"limit": 0})
    assert r.status_code == 422


def test_check_shows_which_recorded_decisions_a_change_would_change(api):
    for agent in ("a1", "a2"):
        decide(api, agent=agent)
    decide(api, agent="a3", role="reviewer")
    before = position(api)
    r = api.post("/v1/rules/check", json={"title": "no git", "source": NO_GIT})
    c = r.json()
    assert r.status_code == 200 and (c["replayed"], c["changed"], c["newly_refused"], c["newly_allowed"]) == (3, 2, 2, 0)
    assert [ch["agent"] for ch in c["changes"]] == ["a1", "a2"]
    assert c["changes"][0]["before"]["effect"] == "allow" and c["changes"][0]["after"]["forbidding"] == "no-git"
    assert position(api) == before  # a check saves nothing
    r = api.post("/v1/rules/check", json={"title": "broken", "source": BROKEN})
    assert r.status_code == 422 and r.json()["error"]["line"] == 3
    api.post("/v1/rules", json={"title": "no git", "source": NO_GIT})
    c = api.post("/v1/rules/check", json={"op": "disable", "id": "R1"}).json()
    assert (c["changed"], c["newly_allowed"]) == (2, 2)
    c = api.post("/v1/rules/check", json={"op": "disable", "id": "S-022", "reason": "x", "all": True}).json()
    assert c["window"] == "all" and c["replayed"] == 3
    r = api.post("/v1/rules/check", json={"op": "explode"})
    assert r.status_code == 422


def test_check_replays_the_last_500_and_all_replays_everything(api):
    hub = api.hub
    for i in range(505):
        law_commands.decide_call(hub.commands, jhrl.Call(role="builder", action="plaza_git", risk="write"), f"a{i}")
    hub.read_models.catch_up()
    c = api.post("/v1/rules/check", json={"title": "no git", "source": NO_GIT}).json()
    assert (c["replayed"], c["changed"], len(c["changes"])) == (500, 500, 200)
    assert c["changes"][0]["agent"] == "a5"
    c = api.post("/v1/rules/check", json={"title": "no git", "source": NO_GIT, "all": True}).json()
    assert (c["replayed"], c["changed"]) == (505, 505)


def test_decisions_and_rule_changes_rebuild_to_the_same_read_models(api):
    api.post("/v1/rules", json={"title": "no git", "source": NO_GIT})
    decide(api)
    decide(api, tool="plaza_vault_list", risk="read")
    api.post("/v1/rules/R1/disable", json={})
    decide(api)
    rm = api.hub.read_models
    rm.catch_up()
    live = rm.live(["laws"])
    assert live == rm.replay(names=["laws"])
    rm.rebuild("laws")
    assert rm.live(["laws"]) == live
    assert [r["decision"] for r in sorted(live["laws"]["rm_recent_calls"], key=lambda r: r["position"])] == ["deny", "deny", "allow"]


# -- the CLI against a real hub -------------------------------------------------------------


def test_cli_rules(folders, tmp_path):
    h = HubProcess(folders).start()
    try:
        with h.client() as c:
            decide(c)
            decide(c, tool="plaza_vault_read", risk="read")
        r = cli(h, "rules", "list")
        assert r.returncode == 0 and "C-002a" in r.stdout and "REFUSED" in r.stdout and "2 calls decided" in r.stdout
        r = cli(h, "rules", "show", "S-006d")
        assert r.returncode == 0 and "law S-006d" in r.stdout
        r = cli(h, "rules", "explain", "--role", "reviewer", "--tool", "engine.edit")
        assert r.returncode == 0 and "default deny" in r.stdout and "S-006a" in r.stdout
        r = cli(h, "rules", "explain", "--role", "reviewer", "--tool", "mcp.call", "--arg", "server=linear", "--arg", "x")
        assert r.returncode == 1 and "K=V" in r.stderr
        r = cli(h, "rules", "infractions", "--limit", "5")
        assert r.returncode == 0 and "C-002a" in r.stdout and "plaza_vault_read" in r.stdout
        src = tmp_path / "no-git.jhrl"
        src.write_text(NO_GIT)
        r = cli(h, "rules", "check", "--file", str(src))
        assert r.returncode == 0 and "1 would change, 1 newly refused" in r.stdout
        r = cli(h, "rules", "check", "--all", stdin=NO_GIT)
        assert r.returncode == 0 and "the whole history" in r.stdout
        r = cli(h, "rules", "add", "--title", "broken", stdin=BROKEN)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "line 3, column 9" in r.stderr and "(jhrl_syntax)" in r.stderr
        r = cli(h, "rules", "add", "--title", "no git", "--file", str(src))
        assert r.returncode == 0 and "add: R1" in r.stdout
        r = cli(h, "--json", "rules", "show", "R1")
        assert r.returncode == 0 and '"kind": "rule"' in r.stdout
        r = cli(h, "rules", "disable", "S-006a")
        assert r.returncode == 1 and "(reason_required)" in r.stderr
        r = cli(h, "rules", "disable", "S-006a", "--reason", "forge down")
        assert r.returncode == 0
        r = cli(h, "rules", "show", "S-006a")
        assert "forge down" in r.stdout
        assert cli(h, "rules", "enable", "S-006a").returncode == 0
        assert cli(h, "rules", "disable", "R1").returncode == 0
        r = cli(h, "rules", "rm", "R1", stdin="")
        assert r.returncode == 1 and "pass --yes" in r.stderr
        r = cli(h, "rules", "rm", "R1", "--yes")
        assert r.returncode == 0 and "delete: R1" in r.stdout
        r = cli(h, "rules", "show", "R1")
        assert r.returncode == 1 and "(rule_not_found)" in r.stderr
    finally:
        h.stop()
