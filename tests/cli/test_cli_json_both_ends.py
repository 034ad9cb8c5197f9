"""``--json`` at the end of a command and at its front give the same answer, for every command.

The same session of commands (reads and writes: the plaza, tasks, agents, the treasury, the vault,
saved hubs, audit and replay ...) runs on two fresh real hubs, once with ``--json`` before every
command and once after it; the two sessions' answers must be the same, but for what differs between
two hubs by nature (times, ids, hashes, addresses, folders). Every argument parse of every command
is checked both ways in ``test_cli_flags``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from support.hubproc import HubProcess

from agentplaza.config import Folders

#: The session: each command as a person types it, without --json.
SESSION: list[tuple[str, ...]] = [
    ("overview",), ("hub", "status"), ("plaza", "state"), ("plaza", "history"), ("log", "unreadable"),
    ("rules", "list"), ("rules", "infractions"), ("rules", "show", "S-001"),
    ("treasury", "balances"), ("treasury", "wallets"), ("treasury", "journal"), ("treasury", "flows"),
    ("treasury", "series"), ("treasury", "payments"), ("treasury", "mint", "500", "--memo", "seed"),
    ("vault", "status"), ("vault", "list"), ("vault", "audit"),
    ("tasks", "list"), ("tasks", "workers"),
    ("tasks", "create", "Write the report", "--acceptance", "a report exists", "--budget", "300"),
    ("tasks", "show", "1"), ("tasks", "timeline", "1"), ("tasks", "bids", "1"), ("tasks", "withdraw", "1"),
    ("approvals", "list"), ("approvals", "list", "--pending"),
    ("models", "providers"), ("models", "presets"), ("models", "list"), ("models", "decision-models"),
    ("models", "tokens"), ("models", "policy"), ("usage",),
    ("agents", "create", "--role", "researcher", "--count", "1"), ("agents", "list"),
    ("society", "roles"), ("nodes", "list"), ("templates", "list"),
    ("plaza", "stop", "--yes"), ("plaza", "state"), ("plaza", "stop", "--yes"), ("plaza", "resume"),
    ("audit", "verify"), ("audit", "anchor"), ("replay", "--upto", "5"),
    ("hub", "list"), ("hub", "use", "nosuch"), ("hub", "logout"),
    ("no-such-command",),
]

#: The commands of the session refused on purpose (both ways alike): templates on a hub with no node, a second
#: STOP ALL, an unknown saved hub, a logout with none saved, a command that does not exist.
REFUSED = [("templates", "list"), ("plaza", "stop", "--yes"), ("hub", "use", "nosuch"), ("hub", "logout"), ("no-such-command",)]

#: What differs between two hubs by nature, each with what it is shown as.
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( UTC)?"), "<time>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"(?<![0-9a-f])[0-9a-f]{16,}(?![0-9a-f])"), "<hex>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "<hub>"),
    (re.compile(r'"(boot_s|took_ms|elapsed_s|uptime_s)": [0-9.]+'), r'"\1": <n>'),
]

#: Parts of an answer that follow the hub's clock, not the command: the signed checkpoints ``audit verify``
#: passes are written every so often.
CLOCKED = {("audit", "verify"): "anchors"}


def normal(text: str, folder: str, words: tuple[str, ...] = ()) -> str:
    if words in CLOCKED and text.startswith("{"):
        data = json.loads(text)
        data.pop(CLOCKED[words], None)
        text = json.dumps(data, indent=2)
    text = text.replace(folder, "<folder>")
    for pattern, shown in VOLATILE:
        text = pattern.sub(shown, text)
    return text


def session(tmp_path, name: str, front: bool) -> list[tuple[tuple[str, ...], int, str, str, str]]:
    base = tmp_path / name
    f = Folders(base / "state", base / "config", base / "data").make()
    h = HubProcess(f)
    h.env["APZ_NODE"] = "off"
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    out = []
    try:
        for words in SESSION:
            argv = ["--json", *words] if front else [*words, "--json"]
            r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *argv], env=h.env, capture_output=True,
                               text=True, timeout=60, stdin=subprocess.DEVNULL)
            out.append((words, r.returncode, normal(r.stdout, str(base), words), normal(r.stderr, str(base)), r.stdout))
    finally:
        h.stop()
    return out


def test_json_at_the_front_and_at_the_end_give_the_same_answer(tmp_path, folders):
    back = session(tmp_path, "b", front=False)
    front = session(tmp_path, "f", front=True)
    answered, differ, refused = 0, [], []
    for (words, rc_b, out_b, err_b, raw), (_, rc_f, out_f, err_f, _) in zip(back, front):
        if (rc_b, out_b, err_b) != (rc_f, out_f, err_f):
            differ.append((words, (rc_b, out_b, err_b), (rc_f, out_f, err_f)))
        elif rc_b == 0:
            json.loads(raw)  # a JSON answer, not a table
            answered += 1
        else:
            refused.append((words, err_b))
    assert not differ, "\n\n".join(map(repr, differ))
    assert [w for w, _ in refused] == REFUSED, refused
