"""kill -9 in the middle of a burst, and two hubs writing to one PostgreSQL at once."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from support.deadline import until
from support.hubproc import HubProcess

BURST_ACKS = 20     # acknowledged commands in flight before the kill (or the end of the race)


def hammer(url: str, tag: str, acked: list, stop: threading.Event, errors: list) -> None:
    """STOP ALL and resume in turn as fast as the hub answers; keep what it acknowledged."""
    with httpx.Client(base_url=url, timeout=10) as c:
        i = 0
        while not stop.is_set():
            i += 1
            reason = f"{tag}-{i}"
            try:
                r = c.post("/v1/plaza/stop", json={"reason": reason})
                if r.status_code == 200:
                    acked.append(reason)
                elif r.status_code != 409:
                    errors.append(r.text)
                r = c.post("/v1/plaza/resume", json={"reason": reason + "-r"})
                if r.status_code == 200:
                    acked.append(reason + "-r")
                elif r.status_code != 409:
                    errors.append(r.text)
            except httpx.TransportError:
                return


def log_of(url: str) -> list[dict]:
    out, after = [], 0
    with httpx.Client(base_url=url, timeout=30) as c:
        while True:
            page = c.get("/v1/events", params={"after": after, "limit": 1000}).json()["events"]
            if not page:
                return out
            out += [m["data"] for m in page]
            after = page[-1]["data"]["position"]


def assert_alternates(log: list[dict]) -> None:
    holds = [e["kind"] for e in log if e["kind"] in ("Plaza.Held", "Plaza.Resumed")]
    for a, b in zip(holds, holds[1:]):
        assert a != b, "the plaza was held (or resumed) twice in a row"


def test_kill_9_during_a_burst_loses_no_acknowledged_command(folders, database_url):
    hub = HubProcess(folders, database_url).start()
    acked, errors, stop = [], [], threading.Event()
    threads = [threading.Thread(target=hammer, args=(hub.url, f"t{i}", acked, stop, errors)) for i in range(4)]
    for t in threads:
        t.start()
    until("the hub acknowledges a burst", lambda: len(acked) >= BURST_ACKS or errors, 60)
    hub.kill()  # SIGKILL: no shutdown, no flush
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert len(acked) > 5
    again = HubProcess(folders, database_url).start()
    try:
        log = log_of(again.url)
        reasons = [e["reason"] for e in log if e["kind"] in ("Plaza.Held", "Plaza.Resumed")]
        missing = [a for a in acked if a not in reasons]
        assert missing == []
        assert len(reasons) == len(set(reasons))
        assert_alternates(log)
        with again.client() as c:
            state = c.get("/v1/plaza").json()
            last = [e for e in log if e["kind"] in ("Plaza.Held", "Plaza.Resumed")][-1]
            assert state["held"] == (last["kind"] == "Plaza.Held") and state["reason"] == last["reason"]
            assert c.get("/v1/hub").json()["projections_at"] == log[-1]["position"]
            verdict = c.get("/v1/audit/verify").json()
            assert verdict["intact"] and verdict["count"] == len(log)
            rebuilt = c.get("/v1/replay").json()["read_models"]
            assert rebuilt["plaza"]["rm_plaza"][0]["held"] == state["held"]
    finally:
        again.stop()


@pytest.mark.parametrize("backend", ["postgres"])
def test_two_hubs_on_one_postgres_lose_nothing_and_keep_the_rules(folders, tmp_path, database_url):
    from agentplaza.config import Folders

    other = Folders(tmp_path / "b-state", tmp_path / "b-config", tmp_path / "b-data").make()
    a = HubProcess(folders, database_url).start()
    b = HubProcess(other, database_url).start()
    try:
        acked, errors, stop = [], [], threading.Event()
        threads = [threading.Thread(target=hammer, args=(h.url, f"{name}{i}", acked, stop, errors))
                   for name, h in (("a", a), ("b", b)) for i in range(3)]
        for t in threads:
            t.start()
        until("both hubs acknowledge a burst", lambda: errors or all(
            sum(r.startswith(name) for r in list(acked)) >= BURST_ACKS for name in "ab"), 60)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        log_a, log_b = log_of(a.url), log_of(b.url)
        assert log_a == log_b
        reasons = [e["reason"] for e in log_a]
        assert sorted(r for r in reasons if r in set(acked)) == sorted(acked)
        assert {r for r in acked if r.startswith("a")} and {r for r in acked if r.startswith("b")}
        assert_alternates(log_a)
        positions = [e["position"] for e in log_a]
        for h in (a, b):
            with h.client() as c:
                deadline = time.time() + 10
                while c.get("/v1/hub").json()["projections_at"] < positions[-1] and time.time() < deadline:
                    time.sleep(0.1)
                counts = c.get("/v1/overview").json()["events"]["total"]
                assert counts == len(log_a)  # every event folded exactly once, none skipped
                assert c.get("/v1/audit/verify").json()["intact"]
                live = c.get("/v1/plaza/history", params={"limit": 1000}).json()["history"]
                assert len(live) == len([e for e in log_a if e["kind"] in ("Plaza.Held", "Plaza.Resumed")])
    finally:
        a.stop()
        b.stop()
