"""The console's Projects and Council screens in a real browser against a real hub (loopback trust off,
so the console signs in with the owner token): a flagged project whose plan the Mayor approved waits for
the owner; the owner approves it on the project's page and its stage moves to Implementation without a
reload; a council motion tied 2-2 waits for the owner, who approves it with a note on the Council screen.
Each screen is checked with axe-core (no serious or critical violation) and the browser logs no error.

The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's, copied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.agentside import AgentSide
from support.deadline import until
from support.hubproc import ROOT, HubProcess

from agentplaza.commands import council as cc
from agentplaza.commands import projects as pc

AXE = ROOT / ".cache" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS_ENV = "APZ_CONSOLE_SHOTS"
SHOWN_MS = 15_000
FAILING_IMPACTS = ("serious", "critical")
REFUSED_ANSWER = "Failed to load resource: the server responded with a status of 4"


@pytest.fixture(scope="module")
def console_hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("console-governance")
    f = Folders(root / "state", root / "config", root / "data").make()
    h = HubProcess(f, args=("--node", "off", "--loopback-trust", "off"))
    for name in ("APZ_TOKEN", "APZ_NODE"):
        h.env.pop(name, None)
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    h.env["APZ_TOKEN"] = owner_token(h)
    try:
        yield h
    finally:
        h.stop()


def owner_token(h) -> str:
    return (h.folders.state / "owner-token").read_text().strip()


def owner_http(h):
    c = h.client()
    c.headers["Authorization"] = "Bearer " + owner_token(h)
    return c


def watch_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and not m.text.startswith(REFUSED_ANSWER)
            else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def sign_in(page, h) -> None:
    from playwright.sync_api import expect

    page.goto(h.url + "/")
    expect(page.get_by_role("heading", name="Sign in to AgentPlaza")).to_be_visible()
    page.get_by_label("Owner token").fill(owner_token(h))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Live", exact=True)).to_be_visible()


def settled(page) -> None:
    page.wait_for_function("() => document.querySelector('main .screen') && "
                           "![...document.querySelectorAll('main .live')].some(e => e.getAttribute('aria-busy') !== 'false')",
                           timeout=SHOWN_MS)


def axe_violations(page) -> list[str]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    found = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ["violations"]});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
    }""")
    return [f"{v['impact']} {v['id']}: {v['help']} at {v['nodes']}" for v in found if v["impact"] in FAILING_IMPACTS]


def test_the_owner_approves_a_flagged_project_and_decides_a_tied_motion(browser, console_hub, tmp_path):
    from playwright.sync_api import expect

    if not AXE.exists():
        pytest.fail(f"the console test needs axe-core at {AXE}: run bash scripts/test.sh", pytrace=False)
    expect.set_options(timeout=SHOWN_MS)
    h = console_hub
    http = owner_http(h)
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path / "console-shots")
    shots.mkdir(parents=True, exist_ok=True)
    with AgentSide(h) as side:
        def s(done):
            """Wait until the hub's read models show ``done`` (asked with the owner token: no loopback trust)."""
            until("the hub to fold the agents' events", lambda: http.get("/v1/hub").json()["projections_at"] >= done.positions[-1])
            return done.value

        n = s(pc.open_project(side.cmds, side.ctx(1), "code", "Release notes site", "Publish the notes",
                              role="orchestrator", owner_flag=True))["id"]
        s(pc.research(side.cmds, side.ctx(2), n, "generators", "a static page", role="researcher"))
        s(pc.propose(side.cmds, side.ctx(3), n, "one page", "t: write the notes", "NOTES.md", role="planner"))
        s(pc.critique(side.cmds, side.ctx(4), n, "fine", False, role="reviewer"))
        until("the hub to commit the spec to the project's repository",
              lambda: http.get(f"/v1/projects/{n}").json()["specs"] == 1, 60)
        asked = s(pc.approve(side.cmds, side.ctx(5), n, role="mayor"))["asked"]
        m = s(cc.propose(side.cmds, side.ctx(30), "priority", "Docs first this week", role="finance"))["id"]
        for seat, cid, vote in (("finance", 30, "yes"), ("counsel", 31, "yes"), ("incident", 32, "no"),
                                ("mayor", 33, "no")):
            s(cc.vote(side.cmds, side.ctx(cid), m, vote, f"{seat}'s view", role=seat))

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        page.get_by_role("link", name="Projects", exact=True).click()
        settled(page)
        listed = page.get_by_role("table", name="Projects")
        expect(listed).to_contain_text("Release notes site")
        expect(listed).to_contain_text("Approval")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "projects.png"), full_page=True)

        listed.get_by_role("link", name=n).click()
        settled(page)
        expect(page.locator('[data-stage="approval"]')).to_have_attribute("aria-current", "step")
        expect(page.locator('[data-what="mayor"]')).to_be_visible()
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "project.png"), full_page=True)
        page.get_by_role("button", name=f"Approve {n}").click()
        page.get_by_role("dialog").get_by_label("Reason (optional)").fill("within the plan")
        page.get_by_role("dialog").get_by_role("button", name="Approve").click()
        expect(page.locator('[data-stage="implementation"]')).to_have_attribute("aria-current", "step")
        assert http.get(f"/v1/projects/{n}").json()["stage"] == "implementation"
        assert http.get(f"/v1/approvals/{asked}").json()["status"] == "approved"

        page.get_by_role("link", name="Council", exact=True).click()
        settled(page)
        motion = page.locator(f'[data-motion="{m}"]')
        expect(motion).to_contain_text("waiting for you")
        expect(page.get_by_role("table", name=f"Votes on {m}")).to_contain_text("incident's view")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "council.png"), full_page=True)
        page.get_by_role("button", name=f"Approve {m}").click()
        page.get_by_role("dialog").get_by_label("Note (optional)").fill("Within the Q4 plan")
        page.get_by_role("dialog").get_by_role("button", name="Approve").click()
        expect(motion).to_contain_text("Within the Q4 plan")
        got = http.get(f"/v1/council/motions/{m}").json()
        assert got["status"] == "carried" and got["owner"] == {"approve": True, "note": "Within the Q4 plan"}
        assert errors == [], errors
    finally:
        context.close()
        http.close()
