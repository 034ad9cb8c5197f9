"""The gateway's cost: a call through the hub against the same call straight to the provider.

  python bench/gateway.py [--quick]

A real apid (SQLite in a temporary folder) forwards OpenAI Chat Completions to
a local fake upstream (tests/support/fake_upstream.py).  The baseline is the
same request, on the same kind of kept-alive connection, sent straight to
that upstream in the same run.

1. added latency, one caller: p50 and p99 of (through the gateway) - (direct)
   (goal, issue 25: p50 <= 1 ms added).  Every call through the gateway is checked
   against the policy and the payer, metered, then charged to the task's
   escrow and committed with its ``ModelCalled`` event (after the answer
   is sent, on the recorder thread).
2. calls per second with CONCURRENCY callers: through the gateway, and direct.

``--against DIR`` also starts a hub from another checkout (a git worktree of an earlier commit) on
the same upstream and times its gateway in turn with this one's: a before/after in one run.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from support.fake_upstream import KEYS, FakeUpstream  # noqa: E402
from support.hubproc import HubProcess  # noqa: E402
from support.treasury import Teller  # noqa: E402

from agentplaza.config import Folders  # noqa: E402

CONCURRENCY = 16
BODY = {"model": "gpt-6-luna", "messages": [{"role": "user", "content": "hello"}]}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def timed(client: httpx.Client, url: str, headers: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.post(url, json=BODY, headers=headers)
        out.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
    return out


def throughput(url: str, headers: dict, seconds: float) -> tuple[float, int, str | None]:
    """Calls/s with CONCURRENCY callers, the calls that failed, and the first failure (None when none did):
    a caller whose call fails counts it and goes on, so one refused connection does not end the step."""
    done, failed = [0] * CONCURRENCY, [0] * CONCURRENCY
    first: list[str] = []
    stop = time.perf_counter() + seconds

    def worker(i: int) -> None:
        with httpx.Client(timeout=30) as c:
            while time.perf_counter() < stop:
                try:
                    r = c.post(url, json=BODY, headers=headers)
                    ok, why = r.status_code == 200, f"HTTP {r.status_code}: {r.text[:200]}"
                except httpx.HTTPError as e:
                    ok, why = False, f"{type(e).__name__}: {e}"
                if ok:
                    done[i] += 1
                else:
                    failed[i] += 1
                    first.append(why)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CONCURRENCY)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0), sum(failed), (first[0] if first else None)


def rate_of(name: str, url: str, headers: dict, seconds: float) -> float:
    """One path's calls/s; exits with a clear message when none of its calls succeeded (a ratio
    against nothing is no figure), and says how many failed when some did."""
    rate, failed, why = throughput(url, headers, seconds)
    if failed:
        print(f"{name}: {failed:,} of the calls with {CONCURRENCY} callers failed (first: {why})", flush=True)
    if rate == 0:
        sys.exit(f"bench/gateway.py: no call {name} succeeded in {seconds:.0f} s with {CONCURRENCY} callers, "
                 "so there is no throughput to compare; see the failure above")
    return rate


def cpu_s(pid: int) -> float:
    """A process's CPU time so far, all its threads (user + system, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup(hub: HubProcess, c: httpx.Client) -> dict:
    """The caller: an agent with a wallet (the treasury's open_wallet) on a task whose escrow pays its calls
    (the wallet and the escrow written beside the hub, on its store, as the agents and tasks areas do)."""
    c.post("/v1/treasury/mint", json={"amount": 400_000})
    with Teller(hub) as teller:
        teller.wallet("1", "bench", "builder")
        teller.escrow("bench", 400_000)
    return c.post("/v1/models/gateway-tokens", json={"cid": "1", "role": "builder", "task": "bench"}).json()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--against", metavar="DIR", help="another checkout whose gateway is timed in turn with this one's")
    args = ap.parse_args()
    n, secs = (200, 2.0) if args.quick else (2000, 8.0)
    tmp = Path(tempfile.mkdtemp(prefix="apz-bench-gw-"))
    atexit.register(shutil.rmtree, tmp, True)  # the run's store and folders go with it
    folders = Folders(tmp / "state", tmp / "config", tmp / "data").make()
    os.environ["APZ_PRICE_FETCH"] = "off"
    with FakeUpstream() as up:
        hub = start_hub(folders, up, None)
        other = start_hub(Folders(tmp / "o-state", tmp / "o-config", tmp / "o-data").make(), up,
                          Path(args.against).resolve()) if args.against else None
        try:
            tok = configure(hub, up)
            via = tok["base_urls"]["openai"] + "/chat/completions"
            via_other = configure(other, up)["base_urls"]["openai"] + "/chat/completions" if other else None
            direct = up.url + "/v1/chat/completions"
            hv, hd = {"authorization": "Bearer plaza"}, {"authorization": f"Bearer {KEYS['openai']}"}
            with httpx.Client(timeout=30) as cv, httpx.Client(timeout=30) as cd, httpx.Client(timeout=30) as co:
                timed(cv, via, hv, 50)
                timed(cd, direct, hd, 50)  # warm both paths
                if via_other:
                    timed(co, via_other, hv, 50)
                gw, base, gw_other = [], [], []
                hub_cpu = other_cpu = 0.0
                for _ in range(4):  # interleave so both see the same machine
                    before = cpu_s(hub.proc.pid)
                    gw += timed(cv, via, hv, n // 4)
                    hub_cpu += cpu_s(hub.proc.pid) - before
                    base += timed(cd, direct, hd, n // 4)
                    if via_other:
                        before = cpu_s(other.proc.pid)
                        gw_other += timed(co, via_other, hv, n // 4)
                        other_cpu += cpu_s(other.proc.pid) - before
            up.requests.clear()
            added50 = (statistics.median(gw) - statistics.median(base)) * 1000
            added99 = (pct(gw, 99) - pct(base, 99)) * 1000
            print(f"direct:  p50 {statistics.median(base) * 1000:.2f} ms  p99 {pct(base, 99) * 1000:.2f} ms  ({n} calls)")
            print(f"gateway: p50 {statistics.median(gw) * 1000:.2f} ms  p99 {pct(gw, 99) * 1000:.2f} ms")
            print(f"added:   p50 {added50:+.2f} ms (goal <= 1 ms)  p99 {added99:+.2f} ms")
            if gw_other:
                other50 = (statistics.median(gw_other) - statistics.median(base)) * 1000
                print(f"against {args.against}: added p50 {other50:+.2f} ms, p99 "
                      f"{(pct(gw_other, 99) - pct(base, 99)) * 1000:+.2f} ms, apid's CPU a call "
                      f"{other_cpu / len(gw_other) * 1000:.2f} ms; this one's added p50 "
                      f"{added50 / other50 if other50 > 0 else float('nan'):.2f}x and CPU a call "
                      f"{hub_cpu / other_cpu:.2f}x that one's")
            print(f"apid's CPU a call, one caller: {hub_cpu / len(gw) * 1000:.2f} ms (all its threads, /proc)")
            rate_gw = rate_of("through the gateway", via, hv, secs)
            up.requests.clear()
            rate_direct = rate_of("straight to the upstream", direct, hd, secs)
            print(f"{CONCURRENCY} callers: gateway {rate_gw:,.0f} calls/s, direct {rate_direct:,.0f} calls/s "
                  f"({rate_gw / rate_direct:.2f}x)")
            with hub.client() as c:
                recorded = c.get("/v1/usage/summary").json()["totals"]["calls"]
            print(f"calls recorded as events: {recorded:,}")
            print(f"gateway: +{added50:.2f} ms p50, +{added99:.2f} ms p99 added; {rate_gw:,.0f} calls/s "
                  f"= {rate_gw / rate_direct:.2f}x direct with {CONCURRENCY} callers")
        finally:
            hub.stop()
            if other is not None:
                other.stop()


def start_hub(folders: Folders, up: FakeUpstream, code: Path | None) -> HubProcess:
    hub = HubProcess(folders, code=code)
    hub.env["APZ_BENCH_OPENAI_KEY"] = KEYS["openai"]
    hub.env["APZ_PRICE_FETCH"] = "off"
    return hub.start()


def configure(hub: HubProcess, up: FakeUpstream) -> dict:
    """The provider pointed at the fake upstream, the policy, and a caller's gateway token."""
    with hub.client() as c:
        c.patch("/v1/models/providers/openai", json={"base_url": up.url + "/v1",
                                                     "key": {"kind": "env", "name": "APZ_BENCH_OPENAI_KEY"}})
        c.patch("/v1/models/policy", json={"worker": ["deepseek/deepseek-flash", "openai/gpt-6-luna"]})
        return setup(hub, c)


if __name__ == "__main__":
    main()
