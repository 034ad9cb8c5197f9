"""The console's Egress and Nodes screens in a real browser against a real hub (loopback trust off, so the
console signs in with the owner token): the egress audit lists every agent's connection, a new one shows
without a reload, the verdict filter narrows it; Add a node shows a join code once and then only its
listing, a bad label's refusal shows beside the form, and Revoke ends an unused code live; Rotate owner
token shows the new token once and the console goes on working (it signs in again with it) while every
other sign-in ends at once, its open page falling back to the sign-in page. Each screen is checked with
axe-core (no serious or critical violation) and the browser logs no error.

The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's."""

from __future__ import annotations

from support.agentside import AgentSide
from support.deadline import until

from agentplaza.commands import agents as ac

from .test_console import prepared
from .test_console_governance import (  # noqa: F401 - the fixture
    AXE,
    SHOTS_ENV,
    SHOWN_MS,
    axe_violations,
    console_hub,
    owner_http,
    owner_token,
    settled,
    sign_in,
    watch_errors,
)


def egress(side, cid, verdict, host, why=None):
    """The transcript entry the egress proxy writes for one connection (runtime.fleet._record_egress)."""
    return ac.add_entry(side.cmds, side.ctx(cid), cid, "egress", f"{verdict} {host}:443", "egress.connect",
                        {"verdict": verdict, "why": why, "host": host, "port": 443})


def test_the_owner_reads_the_egress_audit_adds_and_revokes_a_node_code_and_rotates_the_token(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    side = AgentSide(h)

    def settle(done):
        until("the hub to fold the events", lambda: http.get("/v1/hub").json()["projections_at"] >= done.positions[-1])
        return done.value

    try:
        a, b = settle(ac.spawn(side.cmds, side.cmds.context("owner"), "builder", 2))
        settle(egress(side, a, "allowed", "pypi.org"))
        settle(egress(side, b, "refused", "evil.example", "blocked by the fetch blocklist (evil.example)"))

        context = browser.new_context(viewport={"width": 1280, "height": 800})
        other = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        # Egress: the audit, live, filtered.
        page.get_by_role("link", name="Egress", exact=True).click()
        settled(page)
        audit = page.get_by_role("table", name="Egress audit")
        expect(audit).to_contain_text("pypi.org:443")
        expect(audit).to_contain_text("blocked by the fetch blocklist (evil.example)")
        expect(page.get_by_role("table", name="Egress on each node")).to_contain_text("n0")
        expect(page.get_by_text("No host is blocked")).to_be_visible()
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "egress.png"), full_page=True)
        settle(egress(side, a, "allowed", "github.com"))
        expect(audit.locator("tbody tr").first).to_contain_text("github.com:443")  # newest first, no reload
        page.get_by_label("Verdict").select_option("refused")
        expect(page.get_by_role("table", name="Egress audit").locator("tbody tr")).to_have_count(1)
        expect(page.get_by_role("table", name="Egress audit")).to_contain_text("evil.example")

        # Nodes: Add a node, shown once; a bad label refused beside the form; Revoke, live.
        page.get_by_role("link", name="Nodes", exact=True).click()
        settled(page)
        expect(page.get_by_label("CIDs in use: 2 of 100")).to_be_visible()
        add = page.get_by_role("form", name="Add a node")
        add.get_by_label("Label").fill("atlas/1")
        add.get_by_role("button", name="Make join code").click()
        expect(add.get_by_role("alert")).to_contain_text("a label is 1 to 40 letters")
        assert http.get("/v1/join-codes").json()["codes"] == []  # refused: nothing made
        add.get_by_label("Label").fill("atlas")
        add.get_by_label("Valid for (minutes)").fill("20")
        add.get_by_role("button", name="Make join code").click()
        code = page.get_by_test_id("join-code")
        expect(code).to_contain_text("agentplaza node join apz")
        codes = page.get_by_role("table", name="Join codes")
        expect(codes).to_contain_text("atlas")
        expect(codes).to_contain_text("open")
        secret = code.inner_text().split()[-1]
        assert secret not in codes.inner_text()  # the listing never shows the code itself
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "nodes.png"), full_page=True)
        page.get_by_role("button", name="I copied it").click()
        expect(page.get_by_test_id("join-code")).to_have_count(0)
        assert secret not in page.content()  # shown once: gone from the page
        page.get_by_role("button", name="Revoke join code atlas").click()
        page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
        expect(codes).to_contain_text("revoked")
        expect(page.get_by_role("button", name="Revoke join code atlas")).to_have_count(0)
        assert http.get("/v1/join-codes").json()["codes"][0]["state"] == "revoked"

        # Rotate owner token: this console goes on; another sign-in ends at once.
        elsewhere = other.new_page()
        sign_in(elsewhere, h)
        old = owner_token(h)
        page.get_by_role("button", name="Rotate owner token").click()
        page.get_by_role("dialog").get_by_role("button", name="Rotate").click()
        shown = page.get_by_test_id("owner-token")
        expect(shown).to_contain_text("apz_owner_")
        new = shown.inner_text().strip()
        assert new != old and owner_token(h) == new
        expect(elsewhere.get_by_role("heading", name="Sign in to AgentPlaza")).to_be_visible()
        page.get_by_role("link", name="Overview", exact=True).click()
        settled(page)
        expect(page.get_by_text("Live", exact=True)).to_be_visible()
        expect(page.get_by_role("heading", name="Sign in to AgentPlaza")).to_have_count(0)
        assert errors == []
        context.close()
        other.close()
    finally:
        side.close()
