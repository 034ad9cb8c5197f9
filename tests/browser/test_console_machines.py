"""The console's Machines screen and the Nodes screen's drain, undrain and revoke in a real browser against
a real hub (loopback trust off: the console signs in with the owner token). A machine joined with a code
(its node not connected, so offline) shows on the Machines screen beside n0, the hub's own; on the Nodes
screen the owner drains it, undrains it and revokes it (after a question), and each change shows without
a reload. Each screen is checked with axe-core (no serious or critical violation) and the browser logs no
error. The set-up is tests/browser/test_console_governance.py's."""

from __future__ import annotations

import base64

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

KEY = base64.urlsafe_b64encode(bytes(range(32))).decode().rstrip("=")


def test_the_owner_sees_every_machine_and_drains_undrains_and_revokes_a_node(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    code = http.post("/v1/join-codes", json={"label": "atlas"}).json()["code"]["code"]
    name = http.post("/v1/node/join", json={"code": code, "public_key": KEY}).json()["node"]

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        page.get_by_role("link", name="Machines", exact=True).click()
        settled(page)
        expect(page.get_by_role("region", name="Machine n0")).to_contain_text("the hub's own machine")
        joined = page.get_by_role("region", name=f"Machine {name} (atlas)")
        expect(joined).to_contain_text("offline")
        expect(joined).to_contain_text("No runs on this machine.")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "machines.png"), full_page=True)

        page.get_by_role("link", name="Nodes", exact=True).click()
        settled(page)
        card = page.get_by_role("region", name=f"Node {name}")
        card.get_by_role("button", name=f"Drain {name}").click()
        expect(card).to_contain_text("draining")
        assert http.get(f"/v1/nodes/{name}").json()["node"]["draining"] is True
        card.get_by_role("button", name=f"Undrain {name}").click()
        expect(card.get_by_role("button", name=f"Drain {name}")).to_be_visible()
        assert axe_violations(page) == []
        click_until_asked(page, card.get_by_role("button", name=f"Revoke {name}"))
        page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
        expect(card).to_contain_text("removed for good")
        expect(card.get_by_role("button", name=f"Drain {name}")).to_have_count(0)
        assert http.get(f"/v1/nodes/{name}").json()["node"]["revoked"] is True
        page.screenshot(path=str(shots / "nodes-revoked.png"), full_page=True)
        assert errors == [], errors
    finally:
        context.close()
        http.close()


def click_until_asked(page, button, tries: int = 3) -> None:
    """Click ``button`` until its confirmation opens.  The node's events after the undrain redraw the list (one
    redraw an event family, ``frame.live``): a redraw between the press and the release puts the release on the
    new button, and the browser then sends the click to neither, as a person would click again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        button.click()
        try:
            page.get_by_role("dialog").wait_for(state="visible", timeout=3_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"no confirmation after {tries} clicks")
