"""The console's Projects and Council screens in a real browser against a real hub (loopback trust off,
so the console signs in with the owner token): a flagged project whose plan the Mayor approved waits for
the owner; the owner approves it on the project's page and its stage moves to Implementation without a
reload; a council motion tied 2-2 waits for the owner, who approves it with a note on the Council screen.
Each screen is checked with axe-core (no serious or critical violation) and the browser logs no error.

The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's, copied."""

from __future__ import annotations

from support.agentside import AgentSide
from support.deadline import until

from agentplaza.commands import council as cc
from agentplaza.commands import projects as pc

from .test_console import (  # noqa: F401 - the set-up is test_console's (the fixture and the helpers the other screen tests import from here)
    AXE,
    FAILING_IMPACTS,
    REFUSED_ANSWER,
    SHOTS_ENV,
    SHOWN_MS,
    axe_violations,
    console_hub,
    owner_http,
    owner_token,
    prepared,
    settled,
    sign_in,
    watch_errors,
)


def test_the_owner_approves_a_flagged_project_and_decides_a_tied_motion(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
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
