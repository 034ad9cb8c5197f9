"""The E2B API's sandboxes in the hub: keys, the sandboxes (each a plaza microVM of role ``sandbox``), the
reaper, and STOP ALL's reach over them.

- **Keys** (``Keys``): an ``e2b_`` key is shown once; only its SHA-256 is kept, in ``e2b-keys.json`` in the
  hub's state folder (mode 0600). The owner's token is not a key.
- **Sandboxes** (``Sandboxes``): create boots a VM on node n0 with the role ``sandbox`` (no harness; no
  network device, like every plaza VM), then tells its daemon (``vmm/guest/envd.py``) the environment
  variables. Pause saves it (``sleep``: a memory snapshot, no process left), connect and resume wake it
  with its processes. A cold pause (``memory`` false, E2B's filesystem-only pause, or an auto-pause with
  ``autoPauseMemory`` false) keeps the disk only: the guest is flushed and shut down, and a resume boots
  it cold with its files and its environment variables (kept on its own disk meanwhile, never in the log)
  and none of its processes.
- **In the log**: every sandbox, snapshot, template and build change is an event (``commands/e2b.py``),
  and every read here is the read model's (``projections/e2b.py``), so a hub restart loses none. This
  process keeps only the node link, the sandboxes being changed now and the access tokens' key. At
  start (``reconcile``) a running sandbox whose VM the node no longer runs has ended (``vm_gone``); a
  paused one stays paused, and a connect wakes it from its sleep snapshot on the node's disk.
- **A clean stop** (``pause_running``): when the hub's own node goes with it, every running sandbox is
  paused first (with its memory, all at once, for at most ``SHUTDOWN_PAUSE_S``), so the next start finds
  it paused and a connect wakes it with its files and processes; one not paused in that time ends
  ``vm_gone`` at the next start, as after a crash.
- **The reaper** (``reap``): every ``REAP_EVERY_S`` from hub start it ends a running sandbox past its end
  time, or pauses it when it auto-pauses.
- **STOP ALL**: while the plaza is held every sandbox is ended, and creates, wakes and connects are
  refused (``plaza_held``, 409).

The node gateway that carries the SDK's sandbox requests is ``runtime/e2bgate.py``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..commands import e2b as e2b_commands
from ..domain.base import Refusal
from ..domain.e2b import DEFAULT_TIMEOUT_S, ENDED, FIRST_SANDBOX_CID, PAUSED, RUNNING, STARTING, check_timeout, iso
from ..domain.plaza import HELD_MESSAGE
from ..domain.plaza import held as plaza_held
from ..projections import e2b as e2b_rm
from .e2btemplates import BASE_IMAGE, Templates

log = logging.getLogger("apid.e2b")

#: The keys' file in the hub's state folder, and its mode.
KEYS_FILE, KEYS_MODE = "e2b-keys.json", 0o600
#: Every key starts with this.
KEY_PREFIX = "e2b_"
#: The role of every sandbox VM in the laws.
SANDBOX_ROLE = "sandbox"
#: The SDK's default template, which is the plaza's base image.
BASE_TEMPLATE = "base"
#: The hub's key the sandboxes' access tokens are made with, in its state folder (mode 0600).
TOKEN_KEY_FILE = "e2b-token-key"
#: Where a cold snapshot keeps its source's environment variables, on its own disk, for the sandboxes
#: made from it (each removes the file once read).
COLD_ENV_FILE = "/workspace/.e2b-snapshot-env.json"
#: How often the reaper looks at the sandboxes, in seconds (from hub start).
REAP_EVERY_S = 5.0
#: The envd version the sandboxes' daemon answers as (``vmm/guest/envd.py``).
ENVD_VERSION = "0.5.1"
#: The shape of a sandbox VM.
SANDBOX_VCPUS, SANDBOX_MEMORY_MIB, SANDBOX_DISK_MB = 1, 256, 1024
#: The longest the hub waits for a sandbox VM to boot or wake, in seconds.
BOOT_TIMEOUT_S = 180.0
#: The most sandboxes one fork makes.
MAX_FORKS = 8
#: The longest a clean hub stop spends pausing the running sandboxes (all at once), in seconds.
SHUTDOWN_PAUSE_S = 30.0
#: Why those sandboxes were paused, in the log.
SHUTDOWN_REASON = "the hub stopped"


#: A network rule's fields (E2B's SandboxNetworkConfig as the SDK sends it); any other is refused.
NETWORK_FIELDS = frozenset({"allow_out", "deny_out", "allowOut", "denyOut"})


def check_rules(network: dict) -> dict:
    """``{"allowOut": [...], "denyOut": [...]}`` from a request's network config, or Refusal.
    allowOut: a name, ``*.`` and a name (subdomains only), an IP address or a CIDR block; denyOut: an IP
    address or a CIDR block (``0.0.0.0/0`` denies every host)."""
    if not isinstance(network, dict) or set(network) - NETWORK_FIELDS:
        extra = sorted(set(network) - NETWORK_FIELDS) if isinstance(network, dict) else ["network"]
        raise Refusal("e2b_field_not_served", f"this hub does not serve the network field(s) {', '.join(extra)}")
    allow = network.get("allowOut", network.get("allow_out")) or []
    deny = network.get("denyOut", network.get("deny_out")) or []
    if not isinstance(allow, list) or not isinstance(deny, list) or \
            not all(isinstance(x, str) for x in [*allow, *deny]):
        raise Refusal("invalid_request", "allowOut and denyOut are lists of strings")
    for d in deny:
        try:
            ipaddress.ip_network(d, strict=False)
        except ValueError:
            raise Refusal("invalid_request", f"denyOut takes an IP address or a CIDR block, not {d!r}") from None
    for a in allow:
        try:
            ipaddress.ip_network(a, strict=False)
        except ValueError:
            name = a[2:] if a.startswith("*.") else a
            if not name or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789.-_" for c in name.lower()):
                raise Refusal("invalid_request", f"allowOut takes a name, *.name, an IP or a CIDR, not {a!r}") from None
    return {"allowOut": list(allow), "denyOut": list(deny)}


def _in_nets(addr: str, entries: list) -> str | None:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None
    for e in entries:
        try:
            if ip in ipaddress.ip_network(e, strict=False):
                return e
        except ValueError:
            continue
    return None


def rule_verdict(rules: dict, host: str, resolve=None) -> str | None:
    """Why the sandbox's rules refuse ``host``, or None. An allowed entry wins over a denied one; the
    deny list also applies to the addresses a name resolves to."""
    h = host.lower().rstrip(".")
    for a in rules.get("allowOut") or []:
        a = a.lower()
        if a.startswith("*.") and h.endswith(a[1:]) and h != a[2:]:
            return None
        if h == a or _in_nets(h, [a]):
            return None
    deny = rules.get("denyOut") or []
    if not deny:
        return None
    hit = _in_nets(h, deny)
    if hit is None:
        try:
            addrs = [h] if _in_nets(h, ["0.0.0.0/0", "::/0"]) else \
                [i[4][0] for i in (resolve or socket.getaddrinfo)(h, 443, type=socket.SOCK_STREAM)]
        except OSError:
            addrs = []
        hit = next((e for e in (_in_nets(x, deny) for x in addrs) if e), None)
    return f"the sandbox's denyOut refuses {host} ({hit})" if hit else None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Keys:
    """The E2B keys: id, label, when made, and the key's SHA-256 only."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / KEYS_FILE
        self.lock = threading.Lock()

    def _read(self) -> list:
        try:
            return json.loads(self.path.read_text()).get("keys", [])
        except FileNotFoundError:
            return []

    def _write(self, keys: list) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEYS_MODE)
        with os.fdopen(fd, "w") as f:
            json.dump({"keys": keys}, f, indent=1)
        os.chmod(tmp, KEYS_MODE)
        os.replace(tmp, self.path)

    def create(self, label: str) -> dict:
        label = str(label).strip()
        if not label or len(label) > 80 or any(ord(c) < 32 for c in label):
            raise Refusal("invalid_request", "a key's label is 1 to 80 printable characters")
        key = KEY_PREFIX + secrets.token_hex(20)
        row = {"id": "k" + secrets.token_hex(4), "label": label, "created": iso(_now()), "sha256": key_hash(key)}
        with self.lock:
            self._write([*self._read(), row])
        return {"id": row["id"], "label": label, "created": row["created"], "key": key}

    def list(self) -> list:
        with self.lock:
            return [{k: r[k] for k in ("id", "label", "created")} for r in self._read()]

    def revoke(self, key_id: str) -> None:
        with self.lock:
            keys = self._read()
            kept = [r for r in keys if r["id"] != key_id]
            if len(kept) == len(keys):
                raise Refusal("e2b_key_not_found", f"no E2B key {key_id}")
            self._write(kept)

    def check(self, key: str | None) -> str | None:
        """The id of the key presented, or None."""
        if not key or not key.startswith(KEY_PREFIX):
            return None
        h = key_hash(key)
        with self.lock:
            rows = self._read()
        return next((r["id"] for r in rows if hmac.compare_digest(r["sha256"], h)), None)


@dataclass(frozen=True)
class SandboxParty:
    """A sandbox as the laws see it: its CID and the role ``sandbox`` (never an agent's role)."""

    cid: int
    role: str = SANDBOX_ROLE
    tier: str = "worker"


@dataclass(frozen=True)
class Sandbox:
    """A sandbox as the read model shows it, in E2B's shapes."""

    id: str
    cid: int
    template_id: str
    client_id: str
    metadata: dict
    timeout_s: int
    auto_pause: bool
    started_at: str
    end_at: str
    state: str
    network: dict
    alias: str
    access_token: str
    #: An auto-pause keeps the memory; and, while paused, whether it was paused cold (the disk only).
    auto_pause_memory: bool = True
    cold: bool = False

    @classmethod
    def of(cls, row: dict, access_token: str) -> Sandbox:
        return cls(id=row["sandbox_id"], cid=row["cid"], template_id=row["template_id"], client_id=row["client_id"],
                   metadata=row["metadata"], timeout_s=row["timeout_s"], auto_pause=row["auto_pause"],
                   started_at=row["started_at"], end_at=row["end_at"], state=row["state"],
                   network={"allowOut": row["allow_out"], "denyOut": row["deny_out"]}, alias=row["alias"],
                   access_token=access_token, auto_pause_memory=row["auto_pause_memory"], cold=row["cold"])

    def created(self) -> dict:
        return {"templateID": self.template_id, "sandboxID": self.id, "clientID": self.client_id,
                "envdVersion": ENVD_VERSION, "alias": self.alias, "envdAccessToken": self.access_token,
                "trafficAccessToken": None, "domain": None}

    def listed(self) -> dict:
        return {"templateID": self.template_id, "sandboxID": self.id, "clientID": self.client_id,
                "alias": self.alias, "startedAt": _z(self.started_at), "endAt": _z(self.end_at),
                "cpuCount": SANDBOX_VCPUS, "memoryMB": SANDBOX_MEMORY_MIB, "diskSizeMB": SANDBOX_DISK_MB,
                "state": self.state, "envdVersion": ENVD_VERSION, "metadata": self.metadata}

    def detail(self) -> dict:
        return {**self.listed(), "envdAccessToken": self.access_token, "domain": None,
                "network": self.network, "lifecycle": {"onTimeout": "pause" if self.auto_pause else "kill",
                                                       "autoResume": False}}

    def owner_row(self) -> dict:
        return {"id": self.id, "cid": self.cid, "template": self.template_id, "state": self.state,
                "started": _z(self.started_at), "ends": _z(self.end_at), "metadata": self.metadata}


def _z(at: str) -> str:
    """A time of the log (ISO 8601) as E2B writes it."""
    return iso(dt.datetime.fromisoformat(at.replace("Z", "+00:00")))


def snapshot_info(row: dict) -> dict:
    return {"snapshotID": row["snapshot_id"], "names": row["names"]}


class Sandboxes:
    """The hub's sandboxes. What they are is the log's (``commands/e2b.py``, read back from
    ``projections/e2b.py``); what is kept here is only this process's: the node link, the sandboxes being
    changed now (``busy``), and the key the access tokens are made with."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.keys = Keys(hub.folders.state)
        self.lock = threading.RLock()
        self.busy: set[str] = set()
        self.stopped = threading.Event()
        self.gateway_port: int | None = None
        self.token_key = token_key(Path(hub.folders.state))
        self.templates = Templates(self)
        self.reconciled = False

    # -- the node and the log ---------------------------------------------------------------------
    @property
    def link(self):
        rt = self.hub.runtime
        if rt is None or rt.link is None or not rt.link.up:
            raise Refusal("node_unavailable", "no node runs sandboxes on this hub (apid --node off?)")
        return rt.link

    @property
    def rm(self):
        return self.hub.read_models

    def held(self) -> bool:
        return plaza_held(self.hub.store.get)

    def _refuse_if_held(self) -> None:
        if self.held():
            raise Refusal("plaza_held", f"{HELD_MESSAGE}: no sandbox is created, woken or connected to")

    def ctx(self, actor: str = "hub", reason: str | None = None):
        return self.hub.commands.context(actor, reason)

    def wrote(self, done: Any) -> Any:
        """A command's value once the read model shows it (the gateway and the next request read it): folded
        here, on this thread, when the follower has not yet. (Waiting for the follower cost up to its poll,
        ``kit.POLL_INTERVAL_S``: nothing on this thread kicks it, and a template's create waited twice, 0.3 of
        its 0.5 s.)"""
        if done.positions and self.rm.position() < done.positions[-1]:
            self.rm.catch_up()
        return done.value

    def access_token(self, sandbox_id: str) -> str:
        """The sandbox's envd access token: made from the hub's key, never kept in the log."""
        return hmac.new(self.token_key, f"e2b-envd:{sandbox_id}".encode(), hashlib.sha256).hexdigest()[:40]

    # -- reading ----------------------------------------------------------------------------------
    def get(self, sid: str) -> Sandbox:
        row = e2b_rm.sandbox_row(self.rm, sid)
        if row is None or row["state"] not in e2b_rm.LISTED:
            raise Refusal("e2b_sandbox_not_found", f"sandbox {sid} not found")
        return Sandbox.of(row, self.access_token(sid))

    def list(self, metadata: dict | None = None, states: tuple = (RUNNING, PAUSED)) -> list:
        with self.lock:
            busy = set(self.busy)
        return [Sandbox.of(r, self.access_token(r["sandbox_id"])) for r in e2b_rm.sandbox_rows(self.rm, states, metadata)
                if r["sandbox_id"] not in busy]

    def by_cid(self, cid: int) -> Sandbox | None:
        if cid < FIRST_SANDBOX_CID:
            return None
        row = e2b_rm.sandbox_of_cid(self.rm, cid)
        return Sandbox.of(row, self.access_token(row["sandbox_id"])) if row else None

    def snapshots(self) -> list:
        return [snapshot_info(r) for r in e2b_rm.snapshot_rows(self.rm)]

    def snapshot_named(self, ref: str) -> dict | None:
        """A snapshot by its id, or by a name exactly one snapshot has."""
        found = e2b_rm.snapshots_named(self.rm, ref)
        if len(found) > 1:
            raise Refusal("invalid_request", f"{len(found)} snapshots are named {ref}; name one by its id")
        return found[0] if found else None

    def running_cid(self, sid: str, token: str | None) -> int:
        """The CID the gateway carries a request to; refuses a wrong access token or a paused sandbox."""
        row = e2b_rm.sandbox_row(self.rm, sid)
        if row is None or row["state"] == ENDED:
            raise LookupError(f"The sandbox {sid} was not found")
        if not token or not hmac.compare_digest(token, self.access_token(sid)):
            raise PermissionError("the sandbox's access token is missing or wrong")
        with self.lock:
            busy = sid in self.busy
        if row["state"] != RUNNING or busy:
            raise LookupError(f"The sandbox {sid} is {row['state']}; connect to it first")
        return row["cid"]

    # -- the API's operations -------------------------------------------------------------------
    def create(self, key_id: str, template: str, timeout: int | None, metadata: dict, env: dict,
               auto_pause: bool, network: dict, actor: str | None = None, auto_pause_memory: bool = True) -> Sandbox:
        self._refuse_if_held()
        source = None
        if template not in (BASE_TEMPLATE, BASE_IMAGE):
            source = self.templates.resolve(template) or self.snapshot_named(template)
            if source is None:
                raise Refusal("e2b_template_not_found", f"template '{template}' not found")
        network = check_rules(network)
        link = self.link  # no node: refused before anything is made
        ttl = check_timeout(DEFAULT_TIMEOUT_S if timeout is None else timeout)
        sid = "i" + secrets.token_hex(10)
        ctx = self.ctx(actor or f"token:{key_id}")
        with self.lock:
            self.busy.add(sid)
        try:
            cid = self.wrote(e2b_commands.create(
                self.hub.commands, ctx, sandbox_id=sid, template_id=source["template_id"] if source else BASE_TEMPLATE,
                alias=template, client_id=key_id, metadata=metadata, timeout_s=ttl, auto_pause=auto_pause,
                network=network, source=(source.get("snapshot_id") or source.get("build_id") or "") if source else "",
                auto_pause_memory=auto_pause_memory))
            try:
                how = {"fork_of": source["cid"], "checkpoint": source["checkpoint"]} if source else {"wipe": True}
                answer = link.request("start", timeout=BOOT_TIMEOUT_S, cid=cid, identity=f"sandbox:{sid}",
                                      role=SANDBOX_ROLE, **how)
                if source and source.get("memory") is False:
                    env = {**self._cold_env(cid), **env}
                self._init(cid, env)  # the variables go to the daemon only: never into the log
            except Exception as e:
                self._stop_vm(sid, cid, "delete")
                self.wrote(e2b_commands.ended(self.hub.commands, self.ctx(), sid, "failed", str(e)))
                raise Refusal("sandbox_failed", f"the sandbox VM did not start: {e}") from None
            self.wrote(e2b_commands.started(self.hub.commands, self.ctx(), sid, float(answer.get("boot_s") or 0)))
        finally:
            with self.lock:
                self.busy.discard(sid)
        if self.held():  # STOP ALL came while it booted: it does not outlive the hold
            self.kill(sid, "stop_all")
            self._refuse_if_held()
        return self.get(sid)

    def _init(self, cid: int, env: dict) -> None:
        """Tell the daemon the sandbox's environment variables (envd's ``POST /init``; it adds them to the
        ones it has, so a fork keeps its source's)."""
        from .e2bgate import envd_call  # noqa: PLC0415 - the gateway module imports this one

        status, _ = envd_call(self.link, cid, "POST", "/init", json.dumps({"envVars": env}).encode())
        if status >= 300:
            raise RuntimeError(f"the sandbox's daemon answered {status} to /init")

    # -- snapshots and forks ------------------------------------------------------------------------
    def snapshot(self, sid: str, name: str | None, memory: bool = True, actor: str = "hub") -> dict:
        """A checkpoint of a running sandbox; a create that names it starts from it. With its memory, the
        processes run on in the new sandbox; cold (``memory`` false), the disk only (the guest flushed
        first): the new sandbox boots with the files, and the source's environment variables, which are
        kept on that disk for it (``COLD_ENV_FILE``), never in the log."""
        if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 128):
            raise Refusal("invalid_name", "a snapshot's name is 1 to 128 characters")
        sb = self.get(sid)
        if sb.state != RUNNING:
            raise Refusal("e2b_sandbox_paused", f"sandbox {sid} is paused; connect to it first")
        link = self.link
        if not memory:
            self._envd(sb.cid, "POST", f"/files?path={COLD_ENV_FILE}", self._envd(sb.cid, "GET", "/envs"),
                       {"content-type": "application/octet-stream"})
        try:
            cp = link.request("checkpoint", timeout=BOOT_TIMEOUT_S, cid=sb.cid, label=f"e2b snapshot of {sid}",
                              disk_only=not memory)
        finally:
            if not memory:
                self._remove(sb.cid, COLD_ENV_FILE)
        snap_id = "s" + secrets.token_hex(8)
        self.wrote(e2b_commands.snapshot(self.hub.commands, self.ctx(actor), snapshot_id=snap_id, name=name,
                                         sandbox_id=sid, checkpoint=cp["name"], memory=memory))
        return {"snapshotID": snap_id, "names": [name] if name else []}

    def _envd(self, cid: int, method: str, target: str, body: bytes = b"", headers: dict | None = None) -> bytes:
        from .e2bgate import envd_call  # noqa: PLC0415 - the gateway module imports this one

        status, answer = envd_call(self.link, cid, method, target, body, headers)
        if status >= 300:
            raise RuntimeError(f"the sandbox's daemon answered {status} to {method} {target.split('?')[0]}")
        return answer

    def _remove(self, cid: int, path: str) -> None:
        from .e2btemplates import run_in_sandbox  # noqa: PLC0415

        code, lines = run_in_sandbox(self.link, cid, f"rm -f {path}", {}, None, 60)
        if code != 0:
            log.warning("e2b: removing %s in cid %s: %s", path, cid, " ".join(lines)[:200])

    def _cold_env(self, cid: int) -> dict:
        """A sandbox made from a cold snapshot: its source's variables, from the disk, which then forgets them."""
        env = json.loads(self._envd(cid, "GET", f"/files?path={COLD_ENV_FILE}") or b"{}")
        self._remove(cid, COLD_ENV_FILE)
        return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}

    def fork(self, key_id: str, sid: str, count: int, timeout: int | None) -> list:
        if not 1 <= count <= MAX_FORKS:
            raise Refusal("invalid_count", f"a fork makes 1 to {MAX_FORKS} sandboxes")
        sb = self.get(sid)
        snap = self.snapshot(sid, None, actor=f"token:{key_id}")
        out = []
        for _ in range(count):
            try:
                out.append({"sandbox": self.create(key_id, snap["snapshotID"], timeout, dict(sb.metadata), {},
                                                   sb.auto_pause, dict(sb.network),
                                                   auto_pause_memory=sb.auto_pause_memory).created()})
            except Refusal as r:
                out.append({"error": {"code": 409 if r.code == "plaza_held" else 500, "message": r.message}})
        return out

    def set_timeout(self, sid: str, timeout: int, actor: str = "hub") -> None:
        self.get(sid)
        self.wrote(e2b_commands.set_timeout(self.hub.commands, self.ctx(actor), sid, timeout))

    def kill(self, sid: str, reason: str = "killed", actor: str = "hub") -> None:
        sb = self.get(sid)
        self._drop_vm(sid, sb.cid)
        self.wrote(e2b_commands.ended(self.hub.commands, self.ctx(actor), sid, reason))

    def _drop_vm(self, sid: str, cid: int) -> None:
        held = cid in e2b_rm.cids_held_by_snapshots(self.rm)
        self._stop_vm(sid, cid, "stop" if held else "delete")  # a snapshot of it keeps its files

    def _stop_vm(self, sid: str, cid: int, how: str) -> None:
        try:
            self.link.request(how, timeout=60, cid=cid)
        except Exception as e:  # noqa: BLE001 - the machine may be gone already
            log.warning("e2b: %s of sandbox %s failed: %s", how, sid, e)

    def _claim(self, sid: str) -> None:
        with self.lock:
            if sid in self.busy:
                raise Refusal("e2b_sandbox_busy", f"sandbox {sid} is being changed; try again")
            self.busy.add(sid)

    def _release(self, sid: str) -> None:
        with self.lock:
            self.busy.discard(sid)

    def pause(self, sid: str, actor: str = "hub", memory: bool = True, healthy: bool = False,
              reason: str | None = None) -> None:
        """Pause a running sandbox. With its memory (``sleep``), a resume finds its processes running; cold
        (``memory`` false), the disk only: its variables are written to its disk, the guest is flushed and
        shut down, and a resume boots it cold. ``healthy``: refused (and it runs on) unless its daemon
        answers first; a cold pause always asks."""
        sb = self.get(sid)
        if sb.state == PAUSED:
            raise Refusal("e2b_sandbox_paused", f"sandbox {sid} is already paused")
        self._claim(sid)
        try:
            if healthy or not memory:
                self._healthy(sb)
            if memory:
                self.link.request("sleep", timeout=BOOT_TIMEOUT_S, cid=sb.cid)
            else:
                self._envd(sb.cid, "POST", f"/files?path={COLD_ENV_FILE}", self._envd(sb.cid, "GET", "/envs"),
                           {"content-type": "application/octet-stream"})
                self._flush(sb.cid)
                self.link.request("stop", timeout=BOOT_TIMEOUT_S, cid=sb.cid)  # a clean shutdown: the disk is whole
            self.wrote(e2b_commands.paused(self.hub.commands, self.ctx(actor, reason), sid, memory))
        finally:
            self._release(sid)

    def _healthy(self, sb: Sandbox) -> None:
        try:
            self._envd(sb.cid, "GET", "/health")
        except Exception as e:  # noqa: BLE001 - any failure to answer is the same answer
            raise Refusal("e2b_guest_unresponsive",
                          f"sandbox {sb.id}'s daemon does not answer ({e}); it was not paused") from None

    def _flush(self, cid: int) -> None:
        """The guest's page cache to its disk (``sync``), before its disk is kept alone."""
        from .e2btemplates import run_in_sandbox  # noqa: PLC0415

        code, lines = run_in_sandbox(self.link, cid, "sync", {}, None, 60)
        if code != 0:
            raise Refusal("e2b_guest_unresponsive", f"the guest did not flush its disk: {' '.join(lines)[:200]}")

    def connect(self, sid: str, timeout: int | None, actor: str = "hub",
                auto_pause: bool | None = None, memory: bool = True) -> tuple[Sandbox, bool]:
        """Resume a paused sandbox (or find it running); returns it and whether it was woken. A sandbox
        paused before the hub restarted is woken from its sleep snapshot on the node's disk; one paused
        cold boots cold from its disk. ``memory`` false (a cold resume) is served for a sandbox that kept no
        memory (paused cold, or running), and refused for one whose memory a resume would drop."""
        sb = self.get(sid)
        self._refuse_if_held()
        if not memory and sb.state == PAUSED and not sb.cold:
            raise Refusal("e2b_field_not_served", f"sandbox {sid} was paused with its memory: a cold resume "
                                                  "(memory false) of it is not served; resume it as it was")
        self._claim(sid)
        woke = sb.state == PAUSED
        try:
            if woke:
                self._wake(sb)
                self.wrote(e2b_commands.resumed(self.hub.commands, self.ctx(actor), sid, timeout, auto_pause))
            elif timeout is not None:
                self.wrote(e2b_commands.extend(self.hub.commands, self.ctx(actor), sid, timeout))
        finally:
            self._release(sid)
        return self.get(sid), woke

    def _wake(self, sb: Sandbox) -> None:
        link = self.link
        try:
            if sb.cold:  # its VM was shut down: the same identity boots cold from its disk, files kept
                link.request("start", timeout=BOOT_TIMEOUT_S, cid=sb.cid, identity=f"sandbox:{sb.id}",
                             role=SANDBOX_ROLE)
                self._init(sb.cid, self._cold_env(sb.cid))
            elif sb.cid in self._node_cids():
                link.request("wake", timeout=BOOT_TIMEOUT_S, cid=sb.cid)
            else:  # this node has not run it since it started: the same identity boots from its sleep state
                link.request("start", timeout=BOOT_TIMEOUT_S, cid=sb.cid, identity=f"sandbox:{sb.id}",
                             role=SANDBOX_ROLE)
        except Exception as e:
            self._drop_vm(sb.id, sb.cid)
            self.wrote(e2b_commands.ended(self.hub.commands, self.ctx(), sb.id, "vm_gone", f"it did not wake: {e}"))
            raise Refusal("e2b_sandbox_not_found", f"sandbox {sb.id} could not be woken ({e}); it has ended") from None

    def _node_cids(self) -> dict:
        return {int(m["cid"]): bool(m.get("running")) for m in self.link.request("list", timeout=30).get("machines", [])}

    def set_network(self, sid: str, network: dict, actor: str = "hub") -> None:
        """New rules; they apply to the sandbox's next connection (the proxy asks on every CONNECT)."""
        self.get(sid)
        self.wrote(e2b_commands.set_network(self.hub.commands, self.ctx(actor), sid, check_rules(network)))

    # -- the loops ------------------------------------------------------------------------------
    def end_all(self, why: str) -> int:
        ended = 0
        for r in e2b_rm.sandbox_rows(self.rm, e2b_rm.LISTED):
            try:
                self.kill(r["sandbox_id"], "stop_all")
                ended += 1
            except Refusal:
                continue  # it ended meanwhile (killed, timed out): nothing left to end
        if ended:
            log.warning("e2b: %d sandbox(es) ended: %s", ended, why)
        return ended

    def reconcile(self) -> bool:
        """Once, when the node is there: the read model against what the node runs. A running sandbox whose
        VM the node no longer runs (a local node goes with the hub) has ended (``vm_gone``), and one that was
        still starting has failed (its create went with the hub); a paused one
        stays paused (its sleep snapshot is on the node's disk, and a connect wakes it); a build that was
        running has failed. Returns whether it was done."""
        try:
            machines = self._node_cids()
        except Refusal:
            return False
        for r in e2b_rm.sandbox_rows(self.rm, (STARTING, RUNNING)):
            with self.lock:
                if r["sandbox_id"] in self.busy:
                    continue
            if r["state"] == STARTING:  # the create that was booting it went with the hub that stopped
                cause, why = "failed", "the hub stopped while it started"
            elif not machines.get(r["cid"]):
                cause, why = "vm_gone", "its VM was not running when the hub started"
            else:
                continue  # still running on a node that outlived the hub: reached as before
            self._drop_vm(r["sandbox_id"], r["cid"])
            try:
                self.wrote(e2b_commands.ended(self.hub.commands, self.ctx(), r["sandbox_id"], cause, why))
            except Refusal:
                pass
        self.templates.reconcile(machines)
        self.reconciled = True
        return True

    def reap(self) -> None:
        """Once: STOP ALL ends every sandbox; a sandbox past its end time is ended (or paused)."""
        if not self.reconciled and not self.reconcile():
            return
        if self.held():
            self.end_all(HELD_MESSAGE)
            return
        now = iso(_now())
        with self.lock:
            busy = set(self.busy)
        due = [r for r in e2b_rm.sandbox_rows(self.rm, (RUNNING,)) if _z(r["end_at"]) <= now
               and r["sandbox_id"] not in busy]
        for r in due:
            try:
                if r["auto_pause"]:
                    self.pause(r["sandbox_id"], memory=r["auto_pause_memory"])
                else:
                    self.kill(r["sandbox_id"], "timeout")
            except Refusal as e:
                log.warning("e2b reaper: %s: %s", r["sandbox_id"], e.message)

    def reaper_loop(self) -> None:
        while not self.stopped.wait(REAP_EVERY_S):
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - the reaper keeps going
                log.exception("e2b reaper")

    def start(self) -> Sandboxes:
        try:
            self.reconcile()
        except Exception:  # noqa: BLE001 - the reaper tries again at its next look
            log.exception("e2b: reconcile at start")
        threading.Thread(target=self.reaper_loop, daemon=True, name="e2b-reaper").start()
        return self

    def pause_running(self, within_s: float = SHUTDOWN_PAUSE_S) -> int:
        """A clean hub stop whose node goes with it: the reaper stops, and every running sandbox (not one
        being changed) is paused with its memory, all at once, waiting at most ``within_s``. Returns how
        many were paused; the others are left as they are (the next start ends them ``vm_gone``)."""
        self.stopped.set()
        with self.lock:
            busy = set(self.busy)
        rows = [r for r in e2b_rm.sandbox_rows(self.rm, (RUNNING,)) if r["sandbox_id"] not in busy]
        done: list = []

        def one(sid: str) -> None:
            try:
                self.pause(sid, reason=SHUTDOWN_REASON)
                done.append(sid)
            except Exception as e:  # noqa: BLE001 - the others are paused all the same
                log.warning("e2b: pausing sandbox %s as the hub stops: %s", sid, e)

        threads = [threading.Thread(target=one, args=(r["sandbox_id"],), daemon=True, name="e2b-stop-pause")
                   for r in rows]
        for t in threads:
            t.start()
        end = time.monotonic() + within_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
        if rows:
            log.warning("e2b: the hub stops: %d of %d running sandbox(es) paused", len(done), len(rows))
        return len(done)

    def close(self) -> None:
        self.stopped.set()


def token_key(state_dir: Path) -> bytes:
    """The hub's key for sandbox access tokens (``TOKEN_KEY_FILE``, 0600), made once."""
    path = state_dir / TOKEN_KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEYS_MODE)
    except FileExistsError:
        return bytes.fromhex(path.read_text().strip())
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


def sandboxes_of(hub: Any) -> Sandboxes:
    """The hub's sandboxes (made and started on first use; the reaper starts with the hub)."""
    sbx = getattr(hub, "e2b", None)
    if sbx is None:
        sbx = hub.e2b = Sandboxes(hub).start()
    return sbx


def wait_until(pred, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
