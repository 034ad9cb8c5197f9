"""The console's Tools screen and the Library's shared files in a real browser against a real hub
(loopback trust off, so the console signs in with the owner token): an agent packaged a program as
version 1 of a tool; the owner reads its program on the Tools screen and approves it, and the version
shows as offered without a reload (the approval is decided, the same one the Approvals screen lists);
the Library screen shows the files agents shared, public and named. Each screen is checked with axe-core
(no serious or critical violation) and the browser logs no error.

The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's."""

from __future__ import annotations

import types

from support.agentside import AgentSide
from support.deadline import until

from agentplaza.runtime import toollib
from agentplaza.runtime.files import files_of

from .test_console import prepared
from .test_console_governance import (  # noqa: F401 - the fixture
    AXE,
    SHOTS_ENV,
    SHOWN_MS,
    axe_violations,
    console_hub,
    owner_http,
    settled,
    sign_in,
    watch_errors,
)

PROGRAM = b"#!/bin/sh\n# count the words of the input\nwc -w\n"


def test_the_owner_reads_a_packaged_program_approves_it_and_sees_the_shared_files(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    with AgentSide(h) as side:
        plaza = types.SimpleNamespace(commands=side.cmds, folders=h.folders)
        ctx = side.ctx(7)
        program = files_of(plaza).share(ctx, 7, "tools/wc.sh", PROGRAM, [7]).value
        files_of(plaza).share(ctx, 7, "notes/findings.md", b"# Findings\n\nthe cache is cold\n")
        done = toollib.package(plaza, ctx, 7, "word_count", program, "Counts the words of its input.")
        until("the hub to fold the agent's events",
              lambda: http.get("/v1/hub").json()["projections_at"] >= done.positions[-1])

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        page.get_by_role("link", name="Tools", exact=True).click()
        settled(page)
        expect(page.get_by_role("table", name="Library tools")).to_contain_text("x_word_count")
        version = page.locator('[data-version="word_count:1"]')
        expect(version).to_contain_text("pending")
        version.get_by_text("The program").click()
        expect(page.get_by_label("Program of x_word_count version 1")).to_contain_text("wc -w")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "tools.png"), full_page=True)
        page.get_by_role("button", name="Approve x_word_count version 1").click()
        page.get_by_role("dialog").get_by_label("Reason (optional)").fill("read the program")
        page.get_by_role("dialog").get_by_role("button", name="Approve").click()
        expect(version).to_contain_text("approved")
        expect(page.get_by_role("button", name="Approve x_word_count version 1")).to_have_count(0)
        got = http.get("/v1/tools/word_count").json()["tool"]
        assert got["approved"] == 1 and got["versions"][0]["status"] == "approved"
        assert http.get(f"/v1/approvals/{done.value['approval']}").json()["status"] == "approved"

        page.get_by_role("link", name="Library", exact=True).click()
        settled(page)
        shared = page.locator('[data-item="f2"]')
        expect(shared).to_contain_text("findings.md")
        expect(shared).to_contain_text("every agent")
        expect(page.locator('[data-item="f1"]')).to_contain_text("@7")
        expect(page.get_by_label("Preview of findings.md")).to_contain_text("the cache is cold")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "library-shared.png"), full_page=True)
        assert errors == [], errors
    finally:
        context.close()
        http.close()
