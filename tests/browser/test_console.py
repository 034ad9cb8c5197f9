"""The web console (issue 18) in a real browser against a real hub: an owner's session, and a foreign page
that cannot ride that session.

The hub runs with loopback trust off, so the console must sign in with the owner token like a browser on
another machine; the command line on this machine reads the token file. One test walks a typical owner
session (sign in, the Overview's budget, a task made on the command line showing up in Open with no
reload, Mint, approve a payment, STOP ALL seen on a second open page, resume, write-check-save a rule, add
a provider key, the spawn wizard's message when no node can boot microVMs) and, on the way, saves a
screenshot of every screen and runs axe-core on it: no serious or critical violation, and no error in the
browser's console (a Content-Security-Policy violation is one). The other opens the attacker's page from
another port of 127.0.0.1 (the same site, so the SameSite=Strict cookie goes with its requests) in the
browser that holds the session, and tries what a page can send: nothing may get through.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import pytest
from support.hubproc import ROOT, HubProcess, cli
from support.treasury import Teller

#: Where the test command installs axe-core from the npm registry (scripts/test.sh).
AXE = ROOT / ".cache" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
#: Where the screenshots go: APZ_CONSOLE_SHOTS, else a folder of the test's own.
SHOTS_ENV = "APZ_CONSOLE_SHOTS"
#: How long the browser waits for the hub and the live stream to show a change.
SHOWN_MS = 15_000
#: axe-core impacts that fail the test.
FAILING_IMPACTS = ("serious", "critical")
#: The screens in sidebar order (agentplaza/api/console/js/screens/index.js).
SCREENS_JS = ROOT / "agentplaza" / "api" / "console" / "js" / "screens" / "index.js"


def screen_ids() -> list[str]:
    """Every built screen, and the first of those that only say their area is not built yet (they are one
    shape: one screenshot and one check cover them)."""
    built, later = [], []
    for line in SCREENS_JS.read_text().splitlines():
        line = line.strip()
        if line.startswith('{id: "'):
            (later if "later:" in line else built).append(line.split('"', 2)[1])
    return built + later[:1]


@pytest.fixture(scope="module")
def console_hub(tmp_path_factory):
    """A fresh hub with no node and loopback trust off: the console must sign in."""
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("console")
    f = Folders(root / "state", root / "config", root / "data").make()
    h = HubProcess(f, args=("--node", "off", "--loopback-trust", "off"))
    for name in ("APZ_TOKEN", "APZ_NODE"):
        h.env.pop(name, None)
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    h.env["APZ_TOKEN"] = owner_token(h)  # the test's second writer (Teller) asks the hub with it
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


#: What Chromium logs for an answer of 4xx: a refusal the screen shows beside what caused it, not a fault.
REFUSED_ANSWER = "Failed to load resource: the server responded with a status of 4"


def watch_errors(page) -> list[str]:
    """The page's script errors and the browser's complaints (a Content-Security-Policy violation is one)."""
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
    """Every live section of the screen has loaded once."""
    page.wait_for_function("() => document.querySelector('main .screen') && "
                           "![...document.querySelectorAll('main .live')].some(e => e.getAttribute('aria-busy') !== 'false')",
                           timeout=SHOWN_MS)


def axe_violations(page) -> list[str]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())  # through the DevTools protocol: the page's CSP stays in force
    found = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ["violations"]});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
    }""")
    return [f"{v['impact']} {v['id']}: {v['help']} at {v['nodes']}" for v in found if v["impact"] in FAILING_IMPACTS]


def test_an_owner_session_in_the_console(browser, console_hub, tmp_path):
    from playwright.sync_api import expect

    if not AXE.exists():
        pytest.fail(f"the console test needs axe-core at {AXE}: run bash scripts/test.sh, which installs it "
                    "from the npm registry (npm install --prefix .cache/npm axe-core@4)", pytrace=False)
    expect.set_options(timeout=SHOWN_MS)
    h = console_hub
    http = owner_http(h)
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path / "console-shots")
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        # The token went to the hub once: the page keeps no copy, and its session cookie is HttpOnly.
        kept = page.evaluate("() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage}) + document.cookie")
        assert owner_token(h) not in kept and "apz_session" not in kept, kept

        # Overview: the new plaza's budget.
        expect(page.get_by_test_id("budget")).to_contain_text("100,000")

        # Tasks: a task made on the command line appears in Open without a reload.
        page.get_by_role("link", name="Tasks", exact=True).click()
        settled(page)
        made = cli(h, "tasks", "create", "Write the release notes", "--acceptance", "a notes file")
        assert made.returncode == 0, made.stderr
        expect(page.locator('[data-lane="open"]')).to_contain_text("Write the release notes")

        # Treasury: Mint 5,000 and see the journal entry arrive.
        page.get_by_role("link", name="Treasury", exact=True).click()
        mint = page.get_by_role("form", name="Mint budget")
        mint.get_by_label("Credits").fill("5000")
        mint.get_by_label("Memo").fill("minted in the console")
        mint.get_by_role("button", name="Mint").click()
        expect(page.get_by_role("table", name="Journal entries")).to_contain_text("minted in the console")

        # Approvals: a payment over the threshold waits; approve it with a reason.
        with Teller(h) as teller:
            teller.wallet("7", "Ada"), teller.wallet("8", "Bob")
            teller.earn("7", 900, "t900")
            teller.pay("7", "8", 600, "the survey")
        page.get_by_role("link", name="Approvals", exact=True).click()
        page.get_by_role("button", name="Approve a1").click()
        page.get_by_role("dialog").get_by_label("Reason (optional)").fill("the survey was good")
        page.get_by_role("dialog").get_by_role("button", name="Approve").click()
        expect(page.get_by_text("Nothing waits for you.")).to_be_visible()
        assert http.get("/v1/approvals/a1").json()["status"] == "approved"

        # STOP ALL on one page, confirmed with a reason; the banner shows on another open page.
        other = context.new_page()
        other_errors = watch_errors(other)
        other.goto(h.url + "/#/overview")
        expect(other.get_by_test_id("budget")).to_be_visible()
        page.get_by_role("button", name="STOP ALL").click()
        page.get_by_role("dialog").get_by_label("Reason").fill("checking the console")
        page.get_by_role("dialog").get_by_role("button", name="STOP ALL").click()
        banner = other.locator(".held-banner")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("checking the console")
        assert http.get("/v1/plaza").json()["held"] is True
        # RESUME from the other page; the first page's banner goes.
        other.get_by_role("button", name="RESUME").click()
        other.get_by_role("dialog").get_by_role("button", name="Resume").click()
        expect(page.locator(".held-banner")).to_be_hidden()
        assert http.get("/v1/plaza").json()["held"] is False

        # Rules: a compile error names its line; Check, then Save, and the rule is listed.
        page.get_by_role("link", name="Rules", exact=True).click()
        source = page.get_by_label("Rule (JHRL)")
        good = source.input_value()
        source.fill(good.replace("forbid", "forbi"))
        page.get_by_role("button", name="Check").click()
        expect(page.get_by_role("alert").filter(has_text="Line 3")).to_be_visible()
        source.fill(good)
        page.get_by_role("button", name="Check").click()
        expect(page.get_by_text("Check passed")).to_be_visible()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_text("Saved rule R1.")).to_be_visible()
        expect(page.get_by_role("table", name="Owner rules")).to_contain_text("No pushing")

        # Models: add a key on a provider's card; the card says Key set and the value is nowhere on the page.
        page.get_by_role("link", name="Models", exact=True).click()
        add = page.get_by_role("form", name="Add key for anthropic")
        add.get_by_label("API key").fill("sk-mock-console-key")
        add.get_by_role("button", name="Save key").click()
        expect(page.get_by_role("region", name="anthropic")).to_contain_text("Key set")
        assert "sk-mock-console-key" not in page.content()

        # Agents: the spawn wizard's last step says plainly that no node can boot microVMs.
        page.get_by_role("link", name="Agents", exact=True).click()
        page.get_by_role("button", name="Spawn agents").click()
        page.get_by_role("button", name="5. Review and spawn").click()
        expect(page.get_by_test_id("no-node")).to_contain_text("No node can boot microVMs")
        # Spawned anyway, the agent waits offline: the roster shows it live, and its page opens.
        page.get_by_role("button", name="Spawn 1 builder").click()
        roster = page.get_by_role("table", name="The roster")
        expect(roster).to_contain_text("builder")
        roster.get_by_role("link").first.click()
        expect(page.get_by_role("region", name="Profile")).to_contain_text("Where the model comes from")
        expect(page.get_by_role("toolbar", name="Agent actions")).to_contain_text("Checkpoint")

        # Every screen: a screenshot, and axe-core finds no serious or critical violation.
        found = []
        for screen in screen_ids():
            page.goto(f"{h.url}/#/{screen}")
            settled(page)
            page.screenshot(path=str(shots / f"{screen}.png"))
            found += [f"{screen}: {v}" for v in axe_violations(page)]
        # A narrow window: the sidebar folds above the screen, and the check still holds.
        page.set_viewport_size({"width": 420, "height": 800})
        page.goto(f"{h.url}/#/overview")
        settled(page)
        page.screenshot(path=str(shots / "overview-narrow.png"))
        found += [f"overview (narrow): {v}" for v in axe_violations(page)]
        assert not found, "\n".join(found)
        assert not errors and not other_errors, errors + other_errors
    finally:
        context.close()


def test_a_foreign_page_cannot_ride_the_consoles_session(browser, console_hub, attacker_sites):
    h = console_hub
    http = owner_http(h)
    assert h.client().get("/v1/hub").status_code == 401  # loopback trust is off: the session is what counts
    context = browser.new_context()
    try:
        page = context.new_page()
        sign_in(page, h)
        assert any(c["name"] == "apz_session" for c in context.cookies(h.url))
        start = http.get("/v1/hub").json()["position"]

        port = attacker_sites["127.0.0.1"]
        cfg = {"tag": "s", "marker": "/nonexistent", "json": False, "hub": h.url,
               "ws": h.url.replace("http", "ws") + "/v1/ws"}
        evil = context.new_page()
        evil.goto(f"http://127.0.0.1:{port}/?cfg={quote(json.dumps(cfg))}")
        seen = evil.evaluate("""async (hub) => {
            const out = {};
            const send = async (path, body) => {
                try {
                    const r = await fetch(hub + path, {method: "POST", mode: "no-cors", credentials: "include",
                                                       headers: {"Content-Type": "text/plain"}, body: JSON.stringify(body)});
                    return r.status;
                } catch (e) { return String(e); }
            };
            out.stop = await send("/v1/plaza/stop", {reason: "a foreign page"});
            out.mint = await send("/v1/treasury/mint", {amount: 1000000, memo: "a foreign page"});
            try {
                const r = await fetch(hub + "/v1/vault/secrets", {credentials: "include"});
                out.read = {status: r.status, body: (await r.text()).slice(0, 100)};
            } catch (e) { out.read = String(e); }
            out.ws = await new Promise((resolve) => {
                const ws = new WebSocket(hub.replace("http", "ws") + "/v1/ws", "apz.events.v1");
                ws.onopen = () => resolve("opened");
                ws.onclose = (e) => resolve("closed " + e.code);
            });
            const frame = document.createElement("iframe");
            frame.name = "sink";
            document.body.append(frame);
            const form = document.createElement("form");
            Object.assign(form, {method: "POST", enctype: "text/plain", action: hub + "/v1/plaza/stop", target: "sink"});
            const field = document.createElement("input");
            Object.assign(field, {name: '{"reason":"a foreign form', value: '"}'});
            form.append(field);
            document.body.append(form);
            const loaded = new Promise((ok) => { frame.onload = ok; });
            form.submit();
            await loaded;
            return out;
        }""", h.url)
        assert not isinstance(seen["read"], dict) or seen["read"]["status"] == 0, seen
        assert seen["ws"] != "opened", seen
        assert http.get("/v1/plaza").json()["held"] is False, seen
        kinds = [e["data"]["kind"] for e in http.get("/v1/events", params={"after": start}).json()["events"]]
        assert kinds == [], (kinds, seen)
        # The console's own page in the same browser still drives the hub with that session.
        assert page.evaluate("""async () => (await fetch("/v1/plaza")).status""") == 200
    finally:
        context.close()
