"""agentplaza node join CODE | run | status | leave: this machine as a node of another hub.

The guide, "Joining a machine": "The machine redeems the code, receives its node id and its range of
guest ids, and starts its node process in the background."  ``join`` makes the node's Ed25519 key
(``nodesign.KEY_FILE``, 0600 in this machine's state folder), redeems the code at the hub the code
names (the hub's certificate checked against the code's fingerprint before anything is sent), keeps
what it received (``nodesign.JOINED_FILE``) and starts ``noded --uplink`` in the background: it connects
out to the hub, and the node opens no port.  ``run`` is the same noded in the foreground; ``status``
shows whether it runs and which hub it joined; ``leave`` stops it and forgets the key (the hub's owner
revokes the node to end it there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ...config import folders
from ...joincode import NotACode, parse
from ...nodesign import forget, load_joined, make_key, public_key_text, save_joined
from ..actions import Action, Area, arg
from ..env import Env
from ..errors import HubError
from ..output import pairs

PID_FILE = "node.pid"
LOG_FILE = "node.log"
STATUS_FILE = "node-status.json"  # the uplink's (adapters/kvm/uplink.py)


def _noded_argv() -> list[str]:
    f = folders()
    return [sys.executable, "-m", "agentplaza.adapters.kvm.noded", "--uplink", str(f.state),
            "--vms", str(f.data / "vms"), "--templates", str(f.data / "templates")]


def _pid() -> int | None:
    try:
        pid = int((folders().state / PID_FILE).read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def start_background() -> int:
    f = folders()
    fd = os.open(f.state / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = subprocess.Popen(_noded_argv(), stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                            start_new_session=True, umask=0o022)
    os.close(fd)
    fd = os.open(f.state / PID_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, str(proc.pid).encode())
    os.close(fd)
    return proc.pid


def join(env: Env) -> int:
    from ..client import Client  # HTTP only for the commands that talk to a hub

    try:
        code = parse(env.args.code)
    except NotACode:
        raise HubError("this join code is not valid", "join_code_invalid") from None
    f = folders()
    f.make()
    if load_joined(f.state) is not None:
        raise HubError(f"this machine is node {load_joined(f.state)['node']} of a hub already "
                       "(agentplaza node leave first)", "already_joined")
    forget(f.state)  # a key left by a join that failed half way is no key of any node
    key = make_key(f.state)
    try:
        client = Client(code.hub, pin=code.pin)
        got = client.post("/v1/node/join", {"code": env.args.code.strip(), "public_key": public_key_text(key)})
    except BaseException:
        forget(f.state)
        raise
    joined = {"hub": code.hub, "pin": code.pin, "node": got["node"], "cid_first": got["cid_first"],
              "cid_last": got["cid_last"], "joined_at": time.time()}
    save_joined(f.state, joined)
    pid = None if env.args.no_start else start_background()
    return env.show({**joined, "pid": pid}, lambda d: "\n".join([
        f"joined {d['hub']} as node {d['node']} (CIDs {d['cid_first']}-{d['cid_last']})",
        f"noded runs in the background (pid {d['pid']}), connected out to the hub" if d["pid"]
        else "start it with: agentplaza node run"]))


def run(env: Env) -> int:
    if load_joined(folders().state) is None:
        raise HubError("this machine joined no hub (agentplaza node join CODE)", "not_joined")
    return subprocess.call(_noded_argv())


def status(env: Env) -> int:
    f = folders()
    joined = load_joined(f.state)
    try:
        st = json.loads((f.state / STATUS_FILE).read_text())
    except (OSError, ValueError):
        st = {}
    data = {"joined": joined is not None, **(joined or {}), "running": _pid() is not None, "pid": _pid(),
            "connected": bool(st.get("connected")) and _pid() is not None, "last_error": st.get("last_error")}
    return env.show(data, lambda d: pairs({k: d.get(k) for k in ("joined", "hub", "node", "cid_first", "cid_last",
                                                                  "running", "pid", "connected", "last_error")})
                    if d["joined"] else "this machine joined no hub (agentplaza node join CODE)")


def leave(env: Env) -> int:
    f = folders()
    pid = _pid()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)
    joined = load_joined(f.state)
    forget(f.state)
    for name in (PID_FILE, STATUS_FILE):
        try:
            os.unlink(f.state / name)
        except FileNotFoundError:
            pass
    return env.show({"left": joined["node"] if joined else None},
                    lambda d: f"node {d['left']} stopped and its key forgotten; on the hub: agentplaza nodes revoke "
                              f"{d['left']}" if d["left"] else "this machine joined no hub")


AREA = Area("node", "this machine as a node of another hub", (
    Action("join", "redeem a join code and start this node in the background", run=join,
           args=(arg("code"), arg("--no-start", action="store_true", help="join only; start with node run"))),
    Action("run", "run this node in the foreground", run=run),
    Action("status", "whether the node process runs, and which hub it joined", run=status, default=True),
    Action("leave", "stop this node and forget its key", run=leave),
))
