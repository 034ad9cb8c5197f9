"""The console's screens for hiring, payments, discoveries and memory in a real browser against a real hub
(loopback trust off, so the console signs in with the owner token), each reading only /v1 routes:

- Treasury: the payments' approval threshold (approve_over) shown and changed (PATCH /v1/settings);
- Society: the hires (who hired whom, the bonus and what became of it) and outreach (outreach_minutes,
  0 turns it off);
- Tools: the discoveries agents shared, Flag (it sorts last, marked) and Remove (after a question);
- the agent page: the agent's memory notes with their links, and one note opened.

Each screen is checked with axe-core (no serious or critical violation) and the browser logs no error.
The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's."""

from __future__ import annotations

from support.agentside import AgentSide
from support.deadline import until

from agentplaza.commands import conversations as conv
from agentplaza.commands import hiring as hc
from agentplaza.commands import memory as mc
from agentplaza.commands import toolbox as tbc

from .test_console import prepared
from .test_console_governance import (
    axe_violations,
    console_hub,  # noqa: F401 - the module's hub fixture
    owner_http,
    settled,
    sign_in,
    watch_errors,
)


def test_the_owner_sees_hires_sets_the_thresholds_flags_a_discovery_and_reads_an_agents_memory(
        browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    ann, bob = (http.post("/v1/agents", json={"role": role, "count": 1}).json()["agents"][0]["cid"]
                for role in ("builder", "tester"))
    with AgentSide(h) as side:
        def s(done):
            until("the hub to fold the agents' events", lambda: http.get("/v1/hub").json()["projections_at"] >= done.positions[-1])
            return done.value

        s(conv.send(side.cmds, side.ctx(ann), bob, "can you test my parser?"))  # bob becomes ann's contact
        task = s(hc.hire(side.cmds, side.ctx(ann), ann, bob, "Test the parser", "all tests pass"))["id"]
        s(mc.write(side.cmds, side.ctx(ann), ann, "How the build works", "Run make, then see [[Release]]."))
        s(mc.write(side.cmds, side.ctx(ann), ann, "Release", "Tag it and push the tag."))
        found = s(tbc.share(side.cmds, side.ctx(ann), ann, "jq", "filters JSON on the command line", "great",
                            "https://jqlang.org"))

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        page.get_by_role("link", name="Treasury", exact=True).click()
        settled(page)
        shown = page.get_by_test_id("approve-over")
        expect(shown).to_contain_text("500 cr or less moves at once")
        assert axe_violations(page) == []
        page.get_by_label("Approval threshold (credits)").fill("750")
        page.get_by_role("button", name="Save threshold").click()
        expect(page.get_by_text("Saved: the threshold is 750 cr.")).to_be_visible()
        expect(shown).to_contain_text("750 cr or less moves at once")  # live: the settings' event reloads it
        assert http.get("/v1/settings").json()["payments"] == {"approve_over": 750}
        page.screenshot(path=str(shots / "treasury-payments.png"), full_page=True)

        page.get_by_role("link", name="Society", exact=True).click()
        settled(page)
        hires = page.get_by_role("table", name="Hires")
        expect(hires).to_contain_text(task)
        expect(hires).to_contain_text("no bonus")
        expect(hires.get_by_role("link", name=task)).to_have_attribute("href", f"#/tasks/{task}")
        outreach = page.get_by_test_id("outreach")
        expect(outreach).to_contain_text("at most once every 20 minutes")
        assert axe_violations(page) == []
        page.get_by_label("Minutes between outreaches").fill("0")
        page.get_by_role("button", name="Save outreach").click()
        expect(outreach).to_contain_text("Outreach is off")
        assert http.get("/v1/settings").json()["society"] == {"outreach_minutes": 0}
        page.screenshot(path=str(shots / "society-hires.png"), full_page=True)

        page.get_by_role("link", name="Tools", exact=True).click()
        settled(page)
        listed = page.get_by_role("table", name="Discoveries")
        expect(listed).to_contain_text("filters JSON on the command line")
        expect(listed.get_by_role("link", name="https://jqlang.org")).to_have_attribute("rel", "noopener noreferrer nofollow")
        assert axe_violations(page) == []
        page.get_by_role("button", name="Flag jq").click()
        expect(listed).to_contain_text("flagged")
        assert http.get("/v1/toolbox").json()["discoveries"][0]["flagged"] is True
        page.screenshot(path=str(shots / "tools.png"), full_page=True)
        page.get_by_role("button", name="Remove jq").click()
        page.get_by_role("dialog").get_by_role("button", name="Remove").click()
        expect(page.get_by_text("No discoveries yet")).to_be_visible()
        assert http.get("/v1/toolbox").json()["discoveries"] == [] and found["id"]

        page.get_by_role("link", name="Agents", exact=True).click()
        settled(page)
        page.evaluate(f"() => {{ location.hash = '#/agents/{ann}'; }}")
        settled(page)
        notes = page.get_by_role("table", name="Memory notes")
        expect(notes).to_contain_text("How the build works")
        expect(notes).to_contain_text("release")  # its link, and Release's backlink
        assert axe_violations(page) == []
        page.get_by_role("button", name="Open the note How the build works").click()
        expect(page.get_by_role("article", name="The note How the build works")).to_contain_text("Run make")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "agent-memory.png"), full_page=True)
        assert errors == [], errors
    finally:
        context.close()
        http.close()
