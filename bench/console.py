"""The web console's speed: time to a usable Overview and a usable Treasury journal with 10,000 journal
entries and 100 agents in the store, each as a ratio against loading the same data's JSON from the API in
the same browser (goal: at most 1.5x), and the bytes the console transfers on its first load (goal: at most
300 KB).

    python bench/console.py [--quick] [--against DIR]

A real hub (no node) and Debian's headless Chromium through Playwright. "Usable": every live section of
the screen has drawn its data and the top bar its STOP ALL or RESUME (checked at each animation frame).
The baseline: a fresh page on the hub's origin that fetches, in parallel, the JSON the screen reads (the
same requests, the plaza's state included: tests/browser/test_console.py holds the console's first
requests to exactly READS), from the navigation's start to the last body parsed. Both sides are timed alike: from before
``goto`` to the end of one ``page.evaluate`` whose promise settles in the page (Playwright's
``wait_for_function`` compiles its own injected script into the console's page inside the timed window,
40 to 80 ms of that page's main thread on a busy 2-core machine, which the JSON's page never pays).
Each figure is the median of RUNS, the console's and the JSON's runs taken in turn (the quartiles are
printed beside it: on a busy machine they are wide), in one browser profile kept on disk, as a person's
is, and with nothing of the bench listening to the timed pages' requests. The first load's bytes are those of a new profile,
to a usable Overview and then with every other screen's module (which the console fetches by itself
once idle): the goal holds for the whole first visit. The last line is the headline.

``--against DIR`` reads a change instead: a second hub runs the code of another checkout (``git worktree
add DIR <commit>``), and the two consoles are loaded in turn; the last line is the other's time to
usable over this one's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support import chromium  # noqa: E402
from support.hubproc import HubProcess  # noqa: E402
from support.treasury import Teller  # noqa: E402

from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.config import Folders  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402

CHROMIUM = str(chromium.CHROMIUM)
CHROMIUM_ARGS = chromium.launch_args()
JOURNAL_ENTRIES = 10_000
AGENTS = 100
#: Mints per commit while the store is filled (the bench's set-up, not timed).
MINTS_PER_COMMIT = 200
#: The most agents one spawn starts.
SPAWN_MAX = 16
#: Loads of each side per screen: a median of 15 moved by 0.07 from one run of the bench to the next
#: (quartiles about 15 ms apart), of 45 by about a third of that.
RUNS = 45
GOAL_RATIO = 1.5
GOAL_BYTES = 300 * 1024
#: What each screen's live sections read when it opens (agentplaza/api/console/js/screens/*.js; the
#: frame reads the plaza's state, early.js starts them all: tests/test_console.py holds the two alike).
READS = {
    "overview": ["/v1/plaza", "/v1/overview", "/v1/nodes", "/v1/treasury/flows"],
    "treasury": ["/v1/plaza", "/v1/treasury", "/v1/treasury/flows", "/v1/treasury/wallets",
                 "/v1/treasury/journal?limit=25", "/v1/treasury/series?by=day", "/v1/settings"],
}
#: Usable: the screen's every live section has drawn its data, and the top bar its STOP ALL or RESUME
#: (the plaza's state: the baseline fetches it, so the console's side waits for it too).
SETTLED = ("() => document.querySelector('main .screen') && document.querySelectorAll('main .live').length > 0 && "
           "![...document.querySelectorAll('main .live')].some(e => e.getAttribute('aria-busy') !== 'false') && "
           "!!document.querySelector('header .switch button')")
#: Every other screen's module, fetched in the page (what the console fetches by itself once idle, 2 s
#: after the first screen): the first visit's bytes count them too.
EVERY_SCREEN = ("async () => { const main = document.querySelector('script[src$=\"/js/main.js\"]').src; "
                "const {SCREENS} = await import(main.replace(/main\\.js$/, 'screens/index.js')); "
                "await Promise.all(SCREENS.filter((s) => s.load).map((s) => s.load())); }")
#: Resolves in the page at the first animation frame where SETTLED holds (false after a minute).
USABLE = ("() => new Promise((done) => { const settled = " + SETTLED + "; setTimeout(() => done(false), 60000); "
          "const check = () => (settled() ? done(true) : requestAnimationFrame(check)); check(); })")


def fill(h: HubProcess, entries: int, agents: int) -> None:
    with Teller(h) as teller:
        made = 1  # the genesis mint
        while made < entries:
            n = min(MINTS_PER_COMMIT, entries - made)

            def decide(unit, n=n):
                b = tc.books(unit, teller.ctx(), [t.BUDGET])
                for i in range(n):
                    t.mint(b, 1, f"bench mint {i}")
                return tc.booked(unit, b)

            done = teller.cmds.run(decide)
            made += n
        teller._shown(done)
    with h.client() as c:
        left = agents
        while left:
            r = c.post("/v1/agents", json={"role": "builder", "count": min(SPAWN_MAX, left)})
            assert r.status_code == 200, r.text
            left -= min(SPAWN_MAX, left)


def cold(browser, url: str) -> tuple[float, int, int, int]:
    """The first load in a new profile (nothing cached): seconds to a usable Overview, the bytes of the
    console's own files and of all answers by then, and the console's files of the whole first visit
    (every screen's module included)."""
    context = browser.new_context()
    try:
        return console_time(context, url, "overview", every_screen=True)
    finally:
        context.close()


def console_time(context, url: str, screen: str, every_screen: bool = False, counted: bool = True):
    """Seconds to a usable screen on a new page; the bytes of the console's own files and of all answers
    by then (and, with every_screen, of the console's files once every screen's module is here).
    Uncounted, no bytes are taken (they read 0), and nothing listens to the page's requests: a timed
    load is timed without Playwright handing the bench an event for each of its requests, which the
    console's side (its files from the cache as well as its reads) has ten more of than the JSON's."""
    page = context.new_page()
    done = []
    if counted:  # only where the bytes are wanted: each request's event costs the harness, not the page
        page.on("requestfinished", lambda r: done.append(r))
    t0 = time.perf_counter()
    page.goto(f"{url}/#/{screen}")
    assert page.evaluate(USABLE), f"the {screen} screen was not usable within a minute"
    took = time.perf_counter() - t0
    by_then = len(done)
    if every_screen:
        page.evaluate(EVERY_SCREEN)
    sizes = [(r.url, r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"]) for r in done]
    page.close()
    own = sum(n for u, n in sizes[:by_then] if "/v1/" not in u)
    if every_screen:
        return took, own, sum(n for _, n in sizes[:by_then]), sum(n for u, n in sizes if "/v1/" not in u)
    return took, own, sum(n for _, n in sizes[:by_then])


def json_time(context, url: str, screen: str) -> float:
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(f"{url}/console/icon.svg")
    page.evaluate("async (paths) => { await Promise.all(paths.map(async p => (await fetch(p)).json())); }", READS[screen])
    took = time.perf_counter() - t0
    page.close()
    return took


def quartiles(xs: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return f"quartiles {q1 * 1000:.0f} to {q3 * 1000:.0f}"


def hub(root: Path, code: Path | None = None) -> HubProcess:
    h = HubProcess(Folders(root / "state", root / "config", root / "data").make(), args=("--node", "off"), code=code)
    h.env["APZ_PRICE_FETCH"] = "off"
    return h.start()


def side_by_side(other: Path, entries: int, agents: int, runs: int) -> int:
    """``--against DIR``: this checkout's console and the one of another checkout (a git worktree of
    another commit), each served by its own hub over the same store, loaded in turn in one browser
    profile: a change to the console read as the ratio of the two consoles' times to usable. Two copies
    of the same files read within about 5% of each other in 30 rounds."""
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="apz-bench-console-ab-"))
    hubs = {"this": hub(root / "this"), "other": hub(root / "other", other.resolve())}
    try:
        for h in hubs.values():
            fill(h, entries, agents)
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(root / "profile", executable_path=CHROMIUM,
                                                           args=CHROMIUM_ARGS)
            ratios = {}
            for screen in ("overview", "treasury"):
                times: dict[tuple[str, str], list[float]] = {(n, k): [] for n in hubs for k in ("console", "json")}
                for h in hubs.values():
                    console_time(context, h.url, screen)
                    json_time(context, h.url, screen)
                for i in range(runs):
                    for name in (list(hubs) if i % 2 == 0 else list(hubs)[::-1]):
                        times[name, "console"].append(console_time(context, hubs[name].url, screen, counted=False)[0])
                        times[name, "json"].append(json_time(context, hubs[name].url, screen))
                m = {k: statistics.median(v) for k, v in times.items()}
                ratios[screen] = m["other", "console"] / m["this", "console"]
                print(f"{screen}: this {m['this', 'console'] * 1000:.0f} ms ({m['this', 'console'] / m['this', 'json']:.2f}x "
                      f"its JSON), {other} {m['other', 'console'] * 1000:.0f} ms "
                      f"({m['other', 'console'] / m['other', 'json']:.2f}x its JSON)")
            context.close()
        print(f"console side by side: {other}'s time to usable is {ratios['overview']:.3f}x this checkout's on "
              f"Overview and {ratios['treasury']:.3f}x on Treasury")
        return 0
    finally:
        for h in hubs.values():
            h.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1,000 entries and 20 agents, 3 runs")
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another checkout (a git worktree): its console against this one's, in turn")
    args = ap.parse_args()
    entries, agents, runs = (1_000, 20, 3) if args.quick else (JOURNAL_ENTRIES, AGENTS, RUNS)
    if args.against:
        return side_by_side(args.against, entries, agents, runs)
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="apz-bench-console-"))
    h = hub(root)
    try:
        t0 = time.perf_counter()
        fill(h, entries, agents)
        print(f"store: {entries:,} journal entries and {agents} agents in {time.perf_counter() - t0:.1f} s (not timed)")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            first = cold(browser, h.url)
            # One profile kept on disk, as a person's browser keeps one: its pages share the browser's
            # cache and V8's code cache, as a person's tabs do (a new_context is a profile in memory,
            # which compiles every module again on every page).
            context = p.chromium.launch_persistent_context(root / "profile", executable_path=CHROMIUM,
                                                           args=CHROMIUM_ARGS)
            ratios = {}
            for screen in ("overview", "treasury"):
                console_time(context, h.url, screen)  # warm the hub's caches and the browser's
                json_time(context, h.url, screen)
                c, j = [], []
                for _ in range(runs):  # interleaved: a busy moment of the machine falls on both sides alike
                    c.append(console_time(context, h.url, screen, counted=False))
                    j.append(json_time(context, h.url, screen))
                cs = [x[0] for x in c]
                cm, jm = statistics.median(cs), statistics.median(j)
                ratios[screen] = cm / jm
                print(f"{screen}: usable in {cm * 1000:.0f} ms ({quartiles(cs)}); its JSON alone {jm * 1000:.0f} ms "
                      f"({quartiles(j)}); {ratios[screen]:.2f}x")
            context.close()
            browser.close()
        took, own, total, visit = first
        print(f"first load (a new profile): usable Overview in {took * 1000:.0f} ms; the console's files "
              f"{own / 1024:.1f} KB, with the API's answers {total / 1024:.1f} KB; every screen's module "
              f"fetched too, the console's files {visit / 1024:.1f} KB")
        ok = all(r <= GOAL_RATIO for r in ratios.values()) and visit <= GOAL_BYTES
        print(f"console: Overview {ratios['overview']:.2f}x and Treasury journal {ratios['treasury']:.2f}x the JSON "
              f"(goal <= {GOAL_RATIO}x); first load {own / 1024:.0f} KB to a usable Overview, {visit / 1024:.0f} KB "
              f"with every screen (goal <= {GOAL_BYTES // 1024} KB){'' if ok else ' - MISSED'}")
        return 0
    finally:
        h.stop()


if __name__ == "__main__":
    sys.exit(main())
