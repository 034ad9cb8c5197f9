"""Side by side with the peers: the gateway against LiteLLM, the laws against Cedar, the treasury against
TigerBeetle's guarantees.  Every figure is a ratio against the peer, measured in the same run.

    .venv/bin/python bench/peers.py [--quick] [--only gateway,laws,treasury]

1. The model gateway against the LiteLLM proxy.  One fake OpenAI upstream (tests/support/fake_upstream.py)
   in this process; a real apid (SQLite in a temporary folder, the provider's key in its vault, the
   policy, the payer and the meter on) and a LiteLLM proxy (its own config naming the same upstream and
   the same model, no database), both on loopback.  The same client (httpx, one kept-alive connection a
   caller) sends the same request direct, through the gateway and through LiteLLM, interleaved.  Figures:
   added latency p50/p99 over direct, and calls/s with 1, 16 and 64 callers.  LiteLLM's proxy pins its own
   FastAPI, Starlette and pydantic, so it lives in a virtual environment of its own (.cache/peers/litellm,
   made on the first run) and never changes the hub's.
2. A law decision against Cedar (cedarpy: Cedar's own engine in Rust, policy set and entities parsed
   once).  The same 80 laws in both languages, in the built-ins' shape: each built-in's effect (an ask
   law becomes a forbid) and its tools (patterns expanded over the shipped catalogue), its condition
   made a role set; forbid wins, no permit denies.  Every decision is compared, then timed one by one
   (median and p99), and the check of 500 calls: each decided before and after one law is taken out,
   the changed decisions listed (jhrl's ``check_calls``; Cedar's ``is_authorized_batch`` twice).
3. The treasury against TigerBeetle's documented guarantees (its server cannot run here): the table in
   docs/treasury.md names, for each guarantee, the tests that hold it; this checks that every one of them
   exists.

Goals (issue 25): gateway added p50 <= 0.5x LiteLLM's and <= 1 ms, calls/s >= LiteLLM's at 1, 16 and 64
callers; a law decision's median and p99 <= Cedar's.  Figures are printed, never asserted; the
headline ratios are on the last line.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

#: What the peers are installed from (PyPI); the LiteLLM proxy in its own virtual environment.
LITELLM_SPEC = "litellm[proxy]"
CEDARPY_SPEC = "cedarpy>=4.12,<5"
LITELLM_VENV = ROOT / ".cache" / "peers" / "litellm"
LITELLM_MASTER_KEY = "sk-bench-peers-0000"
#: How long the LiteLLM proxy may take to answer /health/liveliness (30-60 s on these machines).
LITELLM_START_S = 180.0
MODEL = "gpt-6-luna"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}
CALLERS = (1, 16, 64)
SEED = 7


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


# -- 1. the gateway against LiteLLM ---------------------------------------------------------------------


def litellm_python() -> Path:
    """The LiteLLM proxy's own interpreter, made on the first run."""
    py = LITELLM_VENV / "bin" / "python"
    if not (LITELLM_VENV / "bin" / "litellm").exists():
        print(f"installing {LITELLM_SPEC} into {LITELLM_VENV.relative_to(ROOT)} (once; a few minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", LITELLM_SPEC], check=True)
    return py


class LiteLLM:
    """The LiteLLM proxy on loopback, its config naming the fake upstream and the model."""

    def __init__(self, upstream_url: str, key: str, folder: Path):
        from support.hubproc import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = folder / "litellm.yaml"
        self.config.write_text(
            "model_list:\n"
            f"  - model_name: {MODEL}\n"
            "    litellm_params:\n"
            f"      model: openai/{MODEL}\n"
            f"      api_base: {upstream_url}/v1\n"
            f"      api_key: {key}\n"
            "general_settings:\n"
            f"  master_key: {LITELLM_MASTER_KEY}\n"
            "litellm_settings:\n"
            "  telemetry: false\n")
        self.log = folder / "litellm.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> LiteLLM:
        py = litellm_python()
        env = dict(os.environ, LITELLM_LOG="ERROR", LITELLM_TELEMETRY="False", NO_DOCS="True",
                   LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("DATABASE_URL", None)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen([str(py.parent / "litellm"), "--config", str(self.config), "--host",
                                          "127.0.0.1", "--port", str(self.port)], stdout=log, stderr=log, env=env)
        deadline = time.time() + LITELLM_START_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the LiteLLM proxy exited: " + self.log.read_text()[-2000:])
            try:
                if httpx.get(self.url + "/health/liveliness", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("the LiteLLM proxy did not start: " + self.log.read_text()[-2000:])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def timed(client: httpx.Client, url: str, headers: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.post(url, json=BODY, headers=headers)
        out.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
    return out


def cpu_seconds(pid: int) -> float:
    """The CPU time a process and its children have used (every thread of each)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for k in kids:
            out += [int(k), *_children(int(k))]
    return out


def throughput(url: str, headers: dict, callers: int, seconds: float) -> tuple[float, int]:
    """Calls per second with ``callers`` callers, each on its own kept-alive connection; and the calls made."""
    done = [0] * callers
    errors: list[str] = []
    start = threading.Barrier(callers + 1, timeout=120)
    stop = [float("inf")]

    def worker(i: int) -> None:
        try:
            with httpx.Client(timeout=60, limits=httpx.Limits(max_keepalive_connections=1)) as c:
                c.post(url, json=BODY, headers=headers)  # its connection opened before the clock starts
                start.wait()
                while time.perf_counter() < stop[0]:
                    r = c.post(url, json=BODY, headers=headers)
                    if r.status_code != 200:
                        errors.append(r.text[:200])
                        return
                    done[i] += 1
        except Exception as e:  # noqa: BLE001 - said below, with the others
            errors.append(f"{type(e).__name__}: {e}")
            start.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    stop[0] = t0 + seconds
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} callers failed: {errors[0]}")
    return sum(done) / (time.perf_counter() - t0), sum(done)


def gateway_setup(hub, upstream_url: str, key: str) -> dict:
    """The caller: an agent with a wallet on a task whose escrow pays its calls; the provider's key in the vault."""
    from support.treasury import Teller

    with hub.client() as c:
        r = c.patch("/v1/models/providers/openai", json={"base_url": upstream_url + "/v1"})
        assert r.status_code == 200, r.text
        r = c.put("/v1/models/providers/openai/key", json={"value": key})
        assert r.status_code == 200 and r.json()["key"] == {"kind": "vault"}, r.text
        r = c.patch("/v1/models/policy", json={"worker": ["deepseek/deepseek-flash", f"openai/{MODEL}"]})
        assert r.status_code == 200, r.text
        c.post("/v1/treasury/mint", json={"amount": 900_000})
        with Teller(hub) as teller:
            teller.wallet("1", "bench", "builder")
            teller.escrow("bench", 900_000)
        return c.post("/v1/models/gateway-tokens", json={"cid": "1", "role": "builder", "task": "bench"}).json()


def bench_gateway(quick: bool) -> dict:
    from support.fake_upstream import KEYS, FakeUpstream
    from support.hubproc import HubProcess

    from agentplaza.config import Folders

    n, secs = (300, 2.0) if quick else (1000, 4.0)
    tmp = Path(tempfile.mkdtemp(prefix="apz-bench-peers-"))
    folders = Folders(tmp / "state", tmp / "config", tmp / "data").make()
    with FakeUpstream() as up:
        up.server.socket.listen(1024)  # 64 callers connect at once (the standard library's backlog is 5)
        peer = LiteLLM(up.url, KEYS["openai"], tmp)
        hub = HubProcess(folders)
        hub.env["APZ_PRICE_FETCH"] = "off"
        try:
            print("starting the LiteLLM proxy and the hub ...", flush=True)
            peer.start()
            hub.start()
            tok = gateway_setup(hub, up.url, KEYS["openai"])
            paths = {
                "direct": (up.url + "/v1/chat/completions", {"authorization": f"Bearer {KEYS['openai']}"}),
                "gateway": (tok["base_urls"]["openai"] + "/chat/completions", {"authorization": "Bearer plaza"}),
                "litellm": (peer.url + "/v1/chat/completions", {"authorization": f"Bearer {LITELLM_MASTER_KEY}"}),
            }
            lat: dict[str, list[float]] = {k: [] for k in paths}
            clients = {k: httpx.Client(timeout=60) for k in paths}
            try:
                for k, (url, h) in paths.items():
                    timed(clients[k], url, h, 50)  # warm every path
                for _ in range(4):  # interleaved, so every path sees the same machine
                    for k, (url, h) in paths.items():
                        lat[k] += timed(clients[k], url, h, n // 4)
            finally:
                for c in clients.values():
                    c.close()
            up.requests.clear()
            p50 = {k: statistics.median(v) * 1000 for k, v in lat.items()}
            p99 = {k: pct(v, 99) * 1000 for k, v in lat.items()}
            for k in paths:
                print(f"  {k:8} p50 {p50[k]:7.2f} ms  p99 {p99[k]:7.2f} ms  ({len(lat[k])} calls, one caller)")
            added = {k: (p50[k] - p50["direct"], p99[k] - p99["direct"]) for k in ("gateway", "litellm")}
            for k, (a50, a99) in added.items():
                print(f"  {k:8} added over direct: p50 {a50:+.2f} ms  p99 {a99:+.2f} ms")
            rates: dict[int, dict[str, float]] = {}
            cpu: dict[int, dict[str, float]] = {}
            pids = {"gateway": hub.proc.pid, "litellm": peer.proc.pid}
            for callers in CALLERS:
                rates[callers], cpu[callers] = {}, {}
                for k, (url, h) in paths.items():
                    before = cpu_seconds(pids[k]) if k in pids else 0.0
                    rates[callers][k], calls = throughput(url, h, callers, secs)
                    if k in pids:
                        cpu[callers][k] = (cpu_seconds(pids[k]) - before) / max(calls, 1) * 1e6
                    up.requests.clear()
                r, u = rates[callers], cpu[callers]
                print(f"  {callers:2} callers: direct {r['direct']:7,.0f}  gateway {r['gateway']:7,.0f}  "
                      f"litellm {r['litellm']:7,.0f} calls/s  (gateway = {r['gateway'] / r['litellm']:.2f}x litellm, "
                      f"{r['gateway'] / r['direct']:.2f}x direct); CPU a call: gateway {u['gateway']:,.0f} us, "
                      f"litellm {u['litellm']:,.0f} us", flush=True)
            with hub.client() as c:
                recorded, deadline = -1, time.time() + 30
                while time.time() < deadline:  # each call is recorded and charged a moment after its answer
                    now = c.get("/v1/usage/summary").json()["totals"]["calls"]
                    if now == recorded:
                        break
                    recorded = now
                    time.sleep(0.5)
                escrow = c.get("/v1/treasury/accounts/escrow:bench/explain").json()["balance"]
                vault_uses = len(c.get("/v1/vault/audit", params={"limit": 500}).json()["lines"])
            print(f"  gateway calls recorded as events: {recorded:,}; the task's escrow now holds {escrow:,} credits "
                  f"(charged); vault audit lines: {vault_uses}")
        finally:
            hub.stop()
            peer.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"added": added, "rates": rates, "cpu": cpu}


# -- 2. a law decision against Cedar --------------------------------------------------------------------


def cedarpy_module():
    try:
        return importlib.import_module("cedarpy")
    except ImportError:
        print(f"installing {CEDARPY_SPEC} (the bench extra) into this environment", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", CEDARPY_SPEC], check=True)
        importlib.invalidate_caches()
        return importlib.import_module("cedarpy")


def law_specs(rng: random.Random) -> list[tuple[str, str, list[str], list[str]]]:
    """(id, effect, tools, roles) for each of the 80 built-ins, in their shape (see the module's docstring)."""
    from jhrl.catalog import ROLES, TOOLS
    from jhrl.compiler import pattern_covers
    from jhrl.laws import builtin_laws

    tools = sorted(TOOLS)
    specs = []
    for law in builtin_laws():
        covered = sorted({t for p in law.actions for t in tools if pattern_covers(p, t)})
        if not covered:  # a pattern over tools the catalogue does not ship (x_*, mcp servers): one of its size
            covered = rng.sample(tools, min(len(law.actions), 3))
        roles = sorted(rng.sample(ROLES, rng.randint(3, 14)))
        specs.append((law.id, "permit" if law.effect == "permit" else "forbid", covered, roles))
    return specs


def jhrl_source(specs) -> str:
    out = []
    for i, (lid, effect, tools, roles) in enumerate(specs):
        out.append(f'law peer-{i} "{lid} in the peers\' shape" {{\n  statement "{lid}, its condition a role set."\n'
                   f"  severity low\n  {effect} {', '.join(tools)}\n  when role in [{', '.join(roles)}]\n}}\n")
    return "".join(out)


def cedar_source(specs) -> str:
    out = []
    for i, (_lid, effect, tools, roles) in enumerate(specs):
        actions = ", ".join(f'Action::"{t}"' for t in tools)
        role_set = ", ".join(f'"{r}"' for r in roles)
        out.append(f'@id("peer-{i}")\n{effect}(principal, action in [{actions}], resource)\n'
                   f"when {{ [{role_set}].contains(context.role) }};\n")
    return "\n".join(out)


def bench_laws(quick: bool) -> dict:
    from jhrl.call import Call
    from jhrl.catalog import ROLES, TOOLS, tier_of
    from jhrl.compiler import compile_laws
    from jhrl.evaluator import decide
    from jhrl.grammar import parse
    from jhrl.ruleset import check_calls

    cedarpy = cedarpy_module()
    rng = random.Random(SEED)
    specs = law_specs(rng)
    laws = parse(jhrl_source(specs))
    lawset = compile_laws(laws)
    policies = cedarpy.PolicySet.from_str(cedar_source(specs))  # parsed once, as the hub would keep it
    entities = cedarpy.Entities.from_json_str("[]")
    changed_specs = specs[:17] + specs[18:]  # one law taken out (a statute disabled)
    changed_lawset = compile_laws(parse(jhrl_source(changed_specs)))
    changed_policies = cedarpy.PolicySet.from_str(cedar_source(changed_specs))

    n = 5_000 if quick else 20_000
    tools = sorted(TOOLS)
    pairs = [(rng.choice(ROLES), rng.choice(tools)) for _ in range(n)]
    # Every call changes something (risk write, autonomous), so jhrl's rule is Cedar's: forbid wins, a permit allows.
    calls = [Call(role=r, tier=tier_of(r), action=a, risk="write") for r, a in pairs]
    requests = [{"principal": 'Agent::"a1"', "action": f'Action::"{a}"', "resource": 'Plaza::"plaza"',
                 "context": {"role": r}} for r, a in pairs]

    def cedar(req, ps=policies):
        return cedarpy.is_authorized(req, ps, entities)

    ours = [decide(lawset, c).effect == "allow" for c in calls[:2000]]
    theirs = [cedar(q).allowed for q in requests[:2000]]
    differ = sum(a != b for a, b in zip(ours, theirs))
    print(f"  {len(laws)} laws in each language; of 2,000 calls {sum(ours):,} allowed; "
          f"decisions that differ: {differ}")
    if differ:
        raise RuntimeError("jhrl and Cedar disagree on the same policy set: the comparison is void")

    clock = time.perf_counter_ns
    j_samples, c_samples = [], []
    for c, q in zip(calls, requests):  # interleaved, one of each in turn
        t0 = clock()
        decide(lawset, c)
        t1 = clock()
        cedar(q)
        t2 = clock()
        j_samples.append(t1 - t0)
        c_samples.append(t2 - t1)
    j_med, j_p99 = statistics.median(j_samples) / 1e3, pct(j_samples, 99) / 1e3
    c_med, c_p99 = statistics.median(c_samples) / 1e3, pct(c_samples, 99) / 1e3
    print(f"  a decision: jhrl median {j_med:.1f} us, p99 {j_p99:.1f} us; Cedar median {c_med:.1f} us, "
          f"p99 {c_p99:.1f} us  ({len(calls):,} calls)")

    last_calls, last_requests = calls[-500:], requests[-500:]

    def jhrl_check():
        return len(check_calls(lawset, changed_lawset, last_calls).changes)

    def cedar_check():
        before = cedarpy.is_authorized_batch(last_requests, policies, entities)
        after = cedarpy.is_authorized_batch(last_requests, changed_policies, entities)
        return sum(b.allowed != a.allowed for b, a in zip(before, after))

    def best(fn, runs=5):
        times, out = [], None
        for _ in range(runs):
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), out

    j_check, j_changes = best(jhrl_check)
    c_check, c_changes = best(cedar_check)
    print(f"  the check of 500 calls (before and after one law is taken out): jhrl {j_check:.2f} ms "
          f"({j_changes} change), Cedar {c_check:.2f} ms ({c_changes} change)")
    return {"median": (j_med, c_med), "p99": (j_p99, c_p99), "check": (j_check, c_check)}


# -- 3. the treasury against TigerBeetle's guarantees ------------------------------------------------------


def bench_treasury() -> dict:
    """Every test docs/treasury.md names in its TigerBeetle table exists."""
    doc = (ROOT / "docs" / "treasury.md").read_text()
    section = doc.split("## Against TigerBeetle's guarantees", 1)
    if len(section) < 2:
        raise RuntimeError("docs/treasury.md has no section 'Against TigerBeetle's guarantees'")
    rows = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("| ") and "`tests/" in line]
    found = missing = 0
    for row in rows:
        for path, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row):
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            if name in names:
                found += 1
            else:
                missing += 1
                print(f"  MISSING: {path}::{name}")
    print(f"  {len(rows)} TigerBeetle guarantees in docs/treasury.md, held by {found} named tests "
          f"({missing} missing)")
    return {"guarantees": len(rows), "tests": found, "missing": missing}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="gateway,laws,treasury")
    args = ap.parse_args()
    only = set(args.only.split(","))
    os.environ["APZ_PRICE_FETCH"] = "off"
    head = []
    if "laws" in only:
        print("laws: jhrl against Cedar (cedarpy)", flush=True)
        r = bench_laws(args.quick)
        head.append(f"law median {r['median'][0] / r['median'][1]:.3f}x Cedar's, p99 {r['p99'][0] / r['p99'][1]:.3f}x, "
                    f"check of 500 {r['check'][0] / r['check'][1]:.3f}x")
    if "treasury" in only:
        print("treasury: against TigerBeetle's documented guarantees", flush=True)
        r = bench_treasury()
        head.append(f"treasury {r['guarantees']} guarantees, {r['tests']} tests, {r['missing']} missing")
    if "gateway" in only:
        print("gateway: against the LiteLLM proxy", flush=True)
        r = bench_gateway(args.quick)
        (g50, g99), (l50, l99) = r["added"]["gateway"], r["added"]["litellm"]
        rates = " ".join(f"{c}:{r['rates'][c]['gateway'] / r['rates'][c]['litellm']:.1f}x" for c in CALLERS)
        head.insert(0, f"gateway added p50 {g50:+.2f} ms = {g50 / l50:.2f}x LiteLLM's ({l50:+.2f}), "
                       f"p99 {g99 / l99:.2f}x; calls/s vs LiteLLM {rates}; CPU a call "
                       f"{r['cpu'][16]['gateway'] / r['cpu'][16]['litellm']:.2f}x LiteLLM's")
    print("peers: " + "; ".join(head))


if __name__ == "__main__":
    main()
