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


def bench_reads() -> dict[str, list[str]]:
    """bench/console.py's READS: what its baseline fetches for each screen."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_console", ROOT / "bench" / "console.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.READS


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



def prepared(tmp_path) -> Path:
    """A screen test's start: axe-core installed (else the test fails, saying how to install it), the
    browser's waits set to SHOWN_MS; the folder its screenshots go to."""
    from playwright.sync_api import expect

    if not AXE.exists():
        pytest.fail(f"the console test needs axe-core at {AXE}: run bash scripts/test.sh, which installs it "
                    "from the npm registry (npm install --prefix .cache/npm axe-core@4)", pytrace=False)
    expect.set_options(timeout=SHOWN_MS)
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path / "console-shots")
    shots.mkdir(parents=True, exist_ok=True)
    return shots

def test_an_owner_session_in_the_console(browser, console_hub, tmp_path):
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
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

        # The first reads of the screen a page opens on start as it opens (early.js), and the screen takes
        # those answers: no path is asked twice before the screen is usable, and what is asked is exactly
        # what bench/console.py's baseline fetches (nothing unused started early, nothing left out).
        reads = bench_reads()
        for screen in ("overview", "treasury"):
            fresh = context.new_page()
            asked: list[str] = []
            fresh.on("request", lambda r, asked=asked: asked.append(r.url.removeprefix(h.url))
                     if r.url.startswith(h.url + "/v1/") else None)
            fresh.goto(f"{h.url}/#/{screen}")
            settled(fresh)
            expect(fresh.locator("header .switch button")).to_be_visible()
            got = list(asked)
            fresh.close()
            assert not sorted({u for u in got if got.count(u) > 1}), (screen, got)
            assert sorted(got) == sorted(reads[screen]), (screen, got)

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
        # A Library preview: the hub's own pages may frame it, a foreign page may not, so a report an agent
        # wrote never runs inside another site's page with the owner's cookie. The hub's door refuses the
        # foreign page's request; the preview's own policy (frame-ancestors 'self', X-Frame-Options
        # SAMEORIGIN: tests/test_library.py) would refuse that frame as well.
        report = hand_in(h, REPORT_HTML, "report.html", "A report")
        framed = evil.evaluate("""async (src) => {
            const got = [];
            window.addEventListener("message", (e) => got.push(String(e.data)));
            const frame = document.createElement("iframe");
            frame.src = src;
            const loaded = new Promise((ok) => { frame.onload = ok; });
            document.body.append(frame);
            await loaded;
            await new Promise((ok) => setTimeout(ok, 500));
            return got;
        }""", f"{h.url}/v1/library/{report}/content?inline=1")
        assert framed == [], framed
        # The console's own page in the same browser still drives the hub with that session.
        assert page.evaluate("""async () => (await fetch("/v1/plaza")).status""") == 200
    finally:
        context.close()


# -- the screens of the areas that came later: Board, Conversations, Society, Git, Library, MCP -------------

#: An HTML report an agent might hand in: its script runs (it writes into its own page) but, framed
#: sandboxed in an opaque origin, it can reach neither the console nor the hub's session.
REPORT_HTML = b"""<!doctype html><html><head><title>Report</title></head><body><p id="out">not run</p><script>
let parentSeen;
try { parentSeen = parent.document.title; } catch (e) { parentSeen = "no access"; }
let cookie;
try { cookie = document.cookie; } catch (e) { cookie = "no cookie"; }
document.getElementById("out").textContent = "ran in " + self.origin + "; console: " + parentSeen + "; " + cookie;
parent.postMessage("the report ran", "*");
</script></body></html>"""
#: A long text, past the board's 8,000-character post limit (MAX_POST_CHARS).
TOO_LONG_POST = "x" * 8001


def png(width: int = 240, height: int = 120) -> bytes:
    """A real PNG (a bar chart's worth of colour), so the browser can draw it."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    def pixel(x: int, y: int) -> bytes:
        bar = (x // 40) % 6
        return bytes((40 + bar * 35, 90, 200 - bar * 25)) if y > height - (bar + 1) * height // 7 else b"\xf6\xf7\xf9"

    rows = b"".join(b"\x00" + b"".join(pixel(x, y) for x in range(width)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def hand_in(h, data: bytes, filename: str, title: str, description: str = "") -> str:
    """A deliverable handed in by agent 7, written to the hub's log by a second writer (as the runtime's
    harness door does); the hub's read models follow the log."""
    import types

    from agentplaza.commands.unit import Commands
    from agentplaza.events.store import EventStore
    from agentplaza.runtime.library import LibraryService

    store = EventStore.open(state_dir=h.folders.state, database_url=h.env.get("APZ_DATABASE_URL"))
    try:
        lib = LibraryService(types.SimpleNamespace(commands=Commands(store), folders=h.folders))
        return lib.submit(lib.cmds.context("agent:7"), data, filename, title, description).value
    finally:
        store.close()


def push_branch(h, repo: str, work: Path) -> None:
    """Clone the plaza's repository with plain git (the owner token as a bearer token), commit on main and on
    a branch ``feature``, and push both."""
    import subprocess

    auth = ["-c", f"http.extraHeader=Authorization: Bearer {owner_token(h)}", "-c", "user.name=Owner",
            "-c", "user.email=owner@plaza.invalid"]

    def git(*args: str, cwd: Path = work) -> None:
        r = subprocess.run(["git", *auth, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, (args, r.stderr)

    git("clone", f"{h.url}/git/{repo}.git", str(work), cwd=work.parent)
    (work / "README.md").write_text("# The site\n")
    git("add", "README.md")
    git("commit", "-m", "A readme")
    git("push", "origin", "HEAD:main")
    git("checkout", "-b", "feature")
    (work / "index.html").write_text("<h1>Hello</h1>\n")
    git("add", "index.html")
    git("commit", "-m", "The front page")
    git("push", "origin", "feature")


def open_screen(page, h, screen: str) -> None:
    page.goto(f"{h.url}/#/{screen}")
    settled(page)


def test_the_later_areas_screens_driven_as_an_owner(browser, console_hub, tmp_path):
    """Board, Conversations, Society, Git, Library and MCP: what the hub holds shows, an owner's action works
    and the screen follows it live, a refusal shows its message beside what caused it; each screen with data
    is screenshotted and checked with axe-core."""
    from playwright.sync_api import expect

    expect.set_options(timeout=SHOWN_MS)
    h = console_hub
    http = owner_http(h)
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path / "console-shots")
    shots.mkdir(parents=True, exist_ok=True)
    made = http.post("/v1/agents", json={"role": "researcher", "count": 2}).json()["agents"]
    ada, bob = (str(a["cid"]) for a in made)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    found: list[str] = []

    def check(screen: str) -> None:
        settled(page)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / f"{screen}.png"), full_page=False)
        found.extend(f"{screen}: {v}" for v in axe_violations(page))

    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)

        # Board: a post made through the API shows; the composer posts; an over-long post is refused beside the
        # composer; Pause shows the Paused banner and Resume takes it away; a reply on the thread's page.
        assert http.post("/v1/board", json={"text": f"The survey starts today, @{ada}"}).status_code == 200
        open_screen(page, h, "board")
        posts = page.get_by_role("list", name="Posts")
        expect(posts).to_contain_text("The survey starts today")
        composer = page.get_by_role("form", name="Post to the board")
        composer.get_by_label("Post to the board").fill(TOO_LONG_POST)
        composer.get_by_role("button", name="Post").click()
        expect(composer.get_by_role("alert")).to_contain_text("at most 8,000 characters (message_too_long)")
        # As a mention is typed, the composer suggests names and roles; choosing one completes it.
        composer.get_by_label("Post to the board").fill("")
        composer.get_by_label("Post to the board").press_sequentially("Who takes the chart? @resea")
        composer.get_by_role("group", name="Mention suggestions").get_by_role("button", name="@researcher").click()
        expect(composer.get_by_label("Post to the board")).to_have_value("Who takes the chart? @researcher ")
        composer.get_by_label("Post to the board").press("Control+Enter")
        expect(posts).to_contain_text("Who takes the chart?")
        page.get_by_role("button", name="Pause deliveries").click()
        page.get_by_role("dialog").get_by_role("button", name="Pause").click()
        expect(page.get_by_test_id("board-paused")).to_contain_text("Paused.")
        assert http.get("/v1/board").json()["paused"] is True
        check("board")
        with page.expect_download() as got:
            page.get_by_role("button", name="Export as Markdown").click()
        exported = Path(got.value.path()).read_text()
        assert exported.startswith("# The board") and "Who takes the chart? @researcher" in exported, exported
        page.get_by_role("button", name="Resume deliveries").click()
        expect(page.get_by_test_id("board-paused")).to_be_hidden()
        assert http.get("/v1/board").json()["paused"] is False
        posts.get_by_role("link", name="Reply").first.click()
        reply = page.get_by_role("form", name="Reply")
        reply.get_by_label("Reply").fill("I will start with the sources.")
        reply.get_by_role("button", name="Reply").click()
        expect(page.get_by_role("list", name="Replies")).to_contain_text("I will start with the sources.")

        # Conversations: the owner's message to an agent is a thread; a message sent from its page shows live;
        # a party that is no CID is refused with its message.
        assert http.post(f"/v1/agents/{ada}/tell", json={"text": "Please read #1 first."}).status_code == 200
        open_screen(page, h, "conversations")
        threads = page.get_by_role("table", name="Conversations")
        expect(threads).to_contain_text(f"owner~{ada}")
        check("conversations")
        page.get_by_label("With").fill("not a cid!")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("alert")).to_contain_text("(invalid_cid)")
        page.get_by_label("With").fill("")
        page.get_by_role("button", name="Show").click()
        threads.get_by_role("link", name=f"owner~{ada}").click()
        messages = page.get_by_role("list", name="Messages")
        expect(messages).to_contain_text("Please read #1 first.")
        box = page.get_by_role("form", name=f"Message agent {ada}")
        box.get_by_label(f"To agent {ada}").fill("And then the survey.")
        box.get_by_role("button", name="Send").click()
        expect(messages).to_contain_text("And then the survey.")

        # Society: Trust more lifts an unrated agent's reputation live; a CID that is no number is refused.
        open_screen(page, h, "society")
        reputation = page.get_by_role("table", name="Reputation")
        row = reputation.get_by_role("row").filter(has=page.get_by_role("link", name=f"Agent {bob}", exact=True))
        expect(row).to_contain_text("unrated")
        row.get_by_role("button", name=f"Trust more: agent {bob}").click()
        expect(row).not_to_contain_text("unrated")
        assert next(a for a in http.get("/v1/society/reputation").json()["agents"] if str(a["cid"]) == bob)["reputation"] > 50
        expect(page.get_by_role("table", name="Ratings")).to_contain_text("trust more")
        check("society")
        page.get_by_label("Contacts, opinions and ratings of agent").fill("abc")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("region", name="The contacts")).to_contain_text("an agent's CID is a number (invalid_cid)")

        # Git: make a repository (a bad name is refused); a branch pushed with plain git and a pull request
        # opened through the API show live; Merge it and see it merged.
        open_screen(page, h, "git")
        page.get_by_text("New repository").click()
        new = page.get_by_role("form", name="New repository")
        new.get_by_label("Name").fill("Bad Name")
        new.get_by_role("button", name="Create repository").click()
        expect(new.get_by_role("alert")).to_contain_text("(invalid_repo)")
        new.get_by_label("Name").fill("site")
        new.get_by_role("button", name="Create repository").click()
        expect(page.get_by_role("table", name="Repositories")).to_contain_text("site")
        work = tmp_path / "site"
        push_branch(h, "site", work)
        pr = http.post("/v1/git/prs", json={"repo": "site", "source": "feature", "title": "The front page"}).json()["pr"]
        prs = page.get_by_role("table", name="Pull requests")
        expect(prs).to_contain_text("The front page")
        check("git")
        prs.get_by_role("link", name=pr["number"]).click()
        expect(page.get_by_role("table", name="Files changed")).to_contain_text("index.html")
        page.get_by_role("button", name=f"Merge {pr['number']}").click()
        page.get_by_role("dialog").get_by_role("button", name="Merge").click()
        expect(page.get_by_role("heading", name=pr["number"])).to_contain_text("merged")
        assert http.get(f"/v1/git/prs/{pr['number']}").json()["pr"]["state"] == "merged"
        page.get_by_role("link", name="site").first.click()
        expect(page.get_by_role("table", name="Files", exact=True)).to_contain_text("index.html")

        # Library: items handed in show as cards with previews (the image drawn; the HTML report's script runs
        # sandboxed, with no access to the console and no cookie); search and type filter; Delete.
        chart = hand_in(h, png(), "chart.png", "The chart", "Spend by week")
        report = hand_in(h, REPORT_HTML, "report.html", "The report")
        notes = hand_in(h, b"# Findings\n\nThree approaches.\n", "NOTES.md", "Findings")
        open_screen(page, h, "library")
        expect(page.get_by_role("article", name=f"{chart} The chart")).to_be_visible()
        image = page.get_by_role("article", name=f"{chart} The chart").get_by_role("img", name="The chart")
        expect(image).to_be_visible()
        page.wait_for_function("(el) => el.complete && el.naturalWidth === 240", arg=image.element_handle())
        frame = page.get_by_role("article", name=f"{report} The report").locator("iframe.report")
        assert frame.get_attribute("sandbox") == "allow-scripts"
        expect(page.frame_locator(f'[data-item="{report}"] iframe.report').locator("#out")).to_have_text(
            "ran in null; console: no access; no cookie")
        expect(page.get_by_label("Preview of Findings")).to_contain_text("Three approaches.")
        check("library")
        page.get_by_role("searchbox", name="Search").fill("week")
        page.get_by_role("button", name="Search", exact=True).click()
        expect(page.locator("[data-item]")).to_have_count(1)
        page.get_by_role("searchbox", name="Search").fill("")
        page.get_by_label("Type").select_option("text")
        expect(page.locator("[data-item]")).to_have_count(1)
        page.get_by_label("Type").select_option("")
        held = len(http.get("/v1/library").json()["items"])  # the module's other test may have handed one in
        expect(page.locator("[data-item]")).to_have_count(held)
        page.get_by_role("button", name=f"Delete {notes}").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete").click()
        expect(page.locator("[data-item]")).to_have_count(held - 1)
        expect(page.locator(f'[data-item="{notes}"]')).to_have_count(0)
        assert http.get(f"/v1/library/{notes}").status_code == 404

        # MCP, This hub as a server: turn it on; answering other machines needs HTTPS and is refused with its
        # message; make a token (shown once), see it listed, a bad expiry refused; revoke it.
        open_screen(page, h, "mcp")
        expect(page.get_by_role("tab", name="This hub as a server")).to_have_attribute("aria-selected", "true")
        page.get_by_role("button", name="Turn on", exact=True).click()
        server = page.get_by_role("region", name="The server")
        expect(server).to_contain_text("on, local")
        assert http.get("/v1/hub-mcp").json()["enabled"] is True
        server.get_by_role("button", name="Answer other machines too (remote)").click()
        expect(server.get_by_role("alert")).to_contain_text("(remote_needs_https)")
        token_form = page.get_by_role("form", name="Make a token")
        token_form.get_by_label("Name").fill("laptop")
        token_form.get_by_label("Expires (optional)").fill("soon")
        token_form.get_by_role("button", name="Make token").click()
        expect(token_form.get_by_role("alert")).to_contain_text("an expiry is a number")
        token_form.get_by_label("Expires (optional)").fill("30d")
        token_form.get_by_role("button", name="Make token").click()
        expect(page.get_by_test_id("mcp-token")).to_contain_text("apz_mcp_")
        tokens = page.get_by_role("table", name="MCP tokens")
        expect(tokens).to_contain_text("laptop")
        check("mcp")
        shown = page.get_by_test_id("mcp-token").inner_text()
        page.get_by_role("button", name="I copied it").click()
        assert shown not in page.content()  # shown once: gone from the page, and never in the list
        tokens.get_by_role("button", name="Revoke laptop").click()
        page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
        expect(tokens).to_contain_text("revoked")
        assert all(t["revoked_at"] for t in http.get("/v1/hub-mcp/tokens").json()["tokens"])
        # Editors (ACP): off on a new hub; the switch turns it on, and the Zed block is there to copy.
        editors = page.get_by_role("region", name="The editors")
        expect(editors).to_contain_text('"args": ["acp"]')
        editors.get_by_role("button", name="Turn on: Editors (ACP)").click()
        expect(editors.get_by_role("button", name="Turn off: Editors (ACP)")).to_be_visible()
        assert http.get("/v1/hub-mcp").json()["acp"]["acp_enabled"] is True
        page.get_by_role("tab", name="MCP servers").click()
        expect(page.get_by_role("tabpanel")).to_contain_text("not built in this hub yet")

        assert http.get("/v1/plaza").json()["held"] is False
        assert not found, "\n".join(found)
        assert not errors, errors
    finally:
        context.close()
