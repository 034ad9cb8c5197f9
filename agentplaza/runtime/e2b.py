"""The E2B API's sandboxes in the hub: keys, the sandboxes (each a plaza microVM of role ``sandbox``), the
reaper, and STOP ALL's reach over them.

- **Keys** (``Keys``): an ``e2b_`` key is shown once; only its SHA-256 is kept, in ``e2b-keys.json`` in the
  hub's state folder (mode 0600). The owner's token is not a key.
- **Sandboxes** (``Sandboxes``): create boots a VM on node n0 with the role ``sandbox`` (no harness; no
  network device, like every plaza VM), then tells its daemon (``vmm/guest/envd.py``) the environment
  variables. Pause saves it (``sleep``: a memory snapshot, no process left), connect and resume wake it.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..commands import e2b as e2b_commands
from ..domain.base import Refusal
from ..domain.plaza import HELD_MESSAGE
from ..domain.plaza import held as plaza_held
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
#: A sandbox's time to live when the request names none, and the longest it may be, in seconds.
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 300, 24 * 3600
#: How often the reaper looks at the sandboxes, in seconds (from hub start).
REAP_EVERY_S = 5.0
#: Sandbox CIDs start here (agents' are far below), one more for each sandbox.
FIRST_SANDBOX_CID = 60000
#: The envd version the sandboxes' daemon answers as (``vmm/guest/envd.py``).
ENVD_VERSION = "0.5.1"
#: The shape of a sandbox VM.
SANDBOX_VCPUS, SANDBOX_MEMORY_MIB, SANDBOX_DISK_MB = 1, 256, 1024
#: The longest the hub waits for a sandbox VM to boot or wake, in seconds.
BOOT_TIMEOUT_S = 180.0
#: The most sandboxes one fork makes.
MAX_FORKS = 8
#: The sandbox states of E2B's API.
RUNNING, PAUSED = "running", "paused"


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


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


@dataclass
class Sandbox:
    id: str
    cid: int
    template_id: str
    client_id: str
    metadata: dict
    env: dict
    timeout_s: int
    auto_pause: bool
    started_at: dt.datetime
    end_at: dt.datetime
    access_token: str
    state: str = RUNNING
    network: dict = field(default_factory=dict)
    alias: str = BASE_TEMPLATE

    def created(self) -> dict:
        return {"templateID": self.template_id, "sandboxID": self.id, "clientID": self.client_id,
                "envdVersion": ENVD_VERSION, "alias": self.alias, "envdAccessToken": self.access_token,
                "trafficAccessToken": None, "domain": None}

    def listed(self) -> dict:
        return {"templateID": self.template_id, "sandboxID": self.id, "clientID": self.client_id,
                "alias": self.alias, "startedAt": iso(self.started_at), "endAt": iso(self.end_at),
                "cpuCount": SANDBOX_VCPUS, "memoryMB": SANDBOX_MEMORY_MIB, "diskSizeMB": SANDBOX_DISK_MB,
                "state": self.state, "envdVersion": ENVD_VERSION, "metadata": self.metadata}

    def detail(self) -> dict:
        return {**self.listed(), "envdAccessToken": self.access_token, "domain": None,
                "network": self.network, "lifecycle": {"onTimeout": "pause" if self.auto_pause else "kill",
                                                       "autoResume": False}}

    def owner_row(self) -> dict:
        return {"id": self.id, "cid": self.cid, "template": self.template_id, "state": self.state,
                "started": iso(self.started_at), "ends": iso(self.end_at), "metadata": self.metadata}


@dataclass
class Snapshot:
    """A checkpoint of a sandbox's VM (memory and disk); shaped like a template's build for a create."""

    id: str
    names: list
    cid: int
    checkpoint: str
    env: dict
    template_id: str

    def info(self) -> dict:
        return {"snapshotID": self.id, "names": self.names}


class Sandboxes:
    """The hub's sandboxes, on the agents' runtime's node link."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.keys = Keys(hub.folders.state)
        self.lock = threading.RLock()
        self.items: dict[str, Sandbox] = {}
        self.busy: set[str] = set()
        self.next_cid = FIRST_SANDBOX_CID
        self.stopped = threading.Event()
        self.gateway_port: int | None = None
        self.templates = Templates(self)
        self.snapshots: dict[str, Snapshot] = {}

    # -- the node -------------------------------------------------------------------------------
    @property
    def link(self):
        rt = self.hub.runtime
        if rt is None or rt.link is None or not rt.link.up:
            raise Refusal("node_unavailable", "no node runs sandboxes on this hub (apid --node off?)")
        return rt.link

    def held(self) -> bool:
        return plaza_held(self.hub.store.get)

    def _refuse_if_held(self) -> None:
        if self.held():
            raise Refusal("plaza_held", f"{HELD_MESSAGE}: no sandbox is created, woken or connected to")

    def _event(self, sb: Sandbox, what: str, **detail) -> None:
        """Each sandbox event: an ``e2b`` event in the log (so on the live bus), and a line in the hub's log."""
        log.info("e2b sandbox %s (cid %s) %s %s", sb.id, sb.cid, what, json.dumps(detail) if detail else "")
        try:
            ctx = self.hub.commands.context("hub")
            e2b_commands.record(self.hub.commands, ctx, sb.id, sb.cid, sb.template_id, what,
                                {k: v for k, v in detail.items() if isinstance(v, (str, int, float, bool, list))})
        except Exception:  # noqa: BLE001 - the sandbox's change stands; the log says why its record did not
            log.exception("e2b: recording %s of sandbox %s", what, sb.id)

    # -- the API's operations -------------------------------------------------------------------
    def create(self, key_id: str, template: str, timeout: int | None, metadata: dict, env: dict,
               auto_pause: bool, network: dict) -> Sandbox:
        self._refuse_if_held()
        build = None
        if template not in (BASE_TEMPLATE, BASE_IMAGE):
            build = self.templates.resolve(template) or self.snapshot_named(template)
            if build is None:
                raise Refusal("e2b_template_not_found", f"template '{template}' not found")
        network = check_rules(network)
        link = self.link  # no node: refused before anything is made
        ttl = DEFAULT_TIMEOUT_S if timeout is None else timeout
        if not 1 <= ttl <= MAX_TIMEOUT_S:
            raise Refusal("invalid_request", f"timeout is 1 to {MAX_TIMEOUT_S} seconds")
        cid = self.new_cid()
        now = _now()
        sb = Sandbox(id="i" + secrets.token_hex(10), cid=cid, template_id=build.template_id if build else BASE_TEMPLATE,
                     client_id=key_id, metadata=dict(metadata), env={**(build.env if build else {}), **env}, timeout_s=ttl, auto_pause=auto_pause,
                     started_at=now, end_at=now + dt.timedelta(seconds=ttl),
                     access_token=secrets.token_urlsafe(24), network=dict(network))
        with self.lock:
            self.items[sb.id] = sb
            self.busy.add(sb.id)
        try:
            how = {"fork_of": build.cid, "checkpoint": build.checkpoint} if build else {"wipe": True}
            answer = link.request("start", timeout=BOOT_TIMEOUT_S, cid=cid, identity=f"sandbox:{sb.id}",
                                  role=SANDBOX_ROLE, **how)
            self._init(sb)
        except Exception as e:
            with self.lock:
                self.items.pop(sb.id, None)
            self._stop_vm(sb, "delete")
            raise Refusal("sandbox_failed", f"the sandbox VM did not start: {e}") from None
        finally:
            with self.lock:
                self.busy.discard(sb.id)
        if self.held():  # STOP ALL came while it booted: it does not outlive the hold
            self.kill(sb.id)
            self._refuse_if_held()
        sb.alias = template
        self._event(sb, "created", boot_s=answer.get("boot_s"), template=template)
        return sb

    def _init(self, sb: Sandbox) -> None:
        """Tell the daemon the sandbox's environment variables (envd's ``POST /init``)."""
        from .e2bgate import envd_call  # noqa: PLC0415 - the gateway module imports this one

        body = json.dumps({"envVars": sb.env}).encode()
        status, _ = envd_call(self.link, sb.cid, "POST", "/init", body)
        if status >= 300:
            raise RuntimeError(f"the sandbox's daemon answered {status} to /init")

    # -- snapshots and forks ------------------------------------------------------------------------
    def snapshot_named(self, ref: str) -> Snapshot | None:
        """A snapshot by its id, or by a name exactly one snapshot has."""
        with self.lock:
            snap = self.snapshots.get(ref)
            named = [x for x in self.snapshots.values() if ref in x.names]
        if snap is not None:
            return snap
        if len(named) > 1:
            raise Refusal("invalid_request", f"{len(named)} snapshots are named {ref}; name one by its id")
        return named[0] if named else None

    def snapshot(self, sid: str, name: str | None, memory: bool = True) -> Snapshot:
        """A memory checkpoint of a running sandbox; a create that names it starts from it."""
        if not memory:
            raise Refusal("e2b_field_not_served", "a cold snapshot (memory false) is not served yet")
        if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 128):
            raise Refusal("invalid_name", "a snapshot's name is 1 to 128 characters")
        sb = self.get(sid)
        if sb.state != RUNNING:
            raise Refusal("e2b_sandbox_paused", f"sandbox {sid} is paused; connect to it first")
        cp = self.link.request("checkpoint", timeout=BOOT_TIMEOUT_S, cid=sb.cid, label=f"e2b snapshot of {sid}")
        snap = Snapshot(id="s" + secrets.token_hex(8), names=[name] if name else [], cid=sb.cid,
                        checkpoint=cp["name"], env=dict(sb.env), template_id=sb.template_id)
        with self.lock:
            self.snapshots[snap.id] = snap
        return snap

    def fork(self, key_id: str, sid: str, count: int, timeout: int | None) -> list:
        if not 1 <= count <= MAX_FORKS:
            raise Refusal("invalid_count", f"a fork makes 1 to {MAX_FORKS} sandboxes")
        sb = self.get(sid)
        snap = self.snapshot(sid, None)
        out = []
        for _ in range(count):
            try:
                out.append({"sandbox": self.create(key_id, snap.id, timeout, dict(sb.metadata), {},
                                                   sb.auto_pause, dict(sb.network)).created()})
            except Refusal as r:
                out.append({"error": {"code": 409 if r.code == "plaza_held" else 500, "message": r.message}})
        return out

    def new_cid(self) -> int:
        with self.lock:
            cid = self.next_cid
            self.next_cid += 1
        return cid

    def get(self, sid: str) -> Sandbox:
        with self.lock:
            sb = self.items.get(sid)
        if sb is None:
            raise Refusal("e2b_sandbox_not_found", f"sandbox {sid} not found")
        return sb

    def list(self, metadata: dict | None = None, states: tuple = (RUNNING, PAUSED)) -> list:
        with self.lock:
            rows = sorted(self.items.values(), key=lambda s: s.started_at)
        return [s for s in rows if s.state in states and s.id not in self.busy
                and all(s.metadata.get(k) == v for k, v in (metadata or {}).items())]

    def set_timeout(self, sid: str, timeout: int) -> None:
        if not 0 <= timeout <= MAX_TIMEOUT_S:
            raise Refusal("invalid_request", f"timeout is 0 to {MAX_TIMEOUT_S} seconds")
        sb = self.get(sid)
        sb.end_at = _now() + dt.timedelta(seconds=timeout)
        sb.timeout_s = timeout
        self._event(sb, "timeout", seconds=timeout)

    def kill(self, sid: str) -> None:
        sb = self.get(sid)
        with self.lock:
            self.items.pop(sid, None)
            held = any(x.cid == sb.cid for x in self.snapshots.values())
        self._stop_vm(sb, "stop" if held else "delete")  # a snapshot of it keeps its files
        self._event(sb, "ended")

    def _stop_vm(self, sb: Sandbox, how: str) -> None:
        try:
            self.link.request(how, timeout=60, cid=sb.cid)
        except Exception as e:  # noqa: BLE001 - the machine may be gone already
            log.warning("e2b: %s of sandbox %s failed: %s", how, sb.id, e)

    def pause(self, sid: str) -> None:
        sb = self.get(sid)
        with self.lock:
            if sb.state == PAUSED:
                raise Refusal("e2b_sandbox_paused", f"sandbox {sid} is already paused")
            if sid in self.busy:
                raise Refusal("e2b_sandbox_busy", f"sandbox {sid} is being changed; try again")
            self.busy.add(sid)
        try:
            self.link.request("sleep", timeout=BOOT_TIMEOUT_S, cid=sb.cid)
            sb.state = PAUSED
        finally:
            with self.lock:
                self.busy.discard(sid)
        self._event(sb, "paused")

    def connect(self, sid: str, timeout: int | None) -> tuple[Sandbox, bool]:
        """Resume a paused sandbox (or find it running); returns it and whether it was woken."""
        sb = self.get(sid)
        self._refuse_if_held()
        woke = False
        with self.lock:
            if sid in self.busy:
                raise Refusal("e2b_sandbox_busy", f"sandbox {sid} is being changed; try again")
            self.busy.add(sid)
        try:
            if sb.state == PAUSED:
                self.link.request("wake", timeout=BOOT_TIMEOUT_S, cid=sb.cid)
                sb.state, woke = RUNNING, True
        finally:
            with self.lock:
                self.busy.discard(sid)
        if timeout is not None or woke:
            ttl = sb.timeout_s if timeout is None else timeout
            sb.end_at = max(sb.end_at, _now() + dt.timedelta(seconds=ttl)) if not woke else \
                _now() + dt.timedelta(seconds=ttl)
        if woke:
            self._event(sb, "resumed")
        return sb, woke

    def by_cid(self, cid: int) -> Sandbox | None:
        with self.lock:
            return next((s for s in self.items.values() if s.cid == cid), None)

    def set_network(self, sid: str, network: dict) -> None:
        """New rules; they apply to the sandbox's next connection (the proxy asks on every CONNECT)."""
        sb = self.get(sid)
        sb.network = check_rules(network)
        self._event(sb, "network", **sb.network)

    def running_cid(self, sid: str, token: str | None) -> int:
        """The CID the gateway carries a request to; refuses a wrong access token or a paused sandbox."""
        with self.lock:
            sb = self.items.get(sid)
        if sb is None:
            raise LookupError(f"The sandbox {sid} was not found")
        if not token or not hmac.compare_digest(token, sb.access_token):
            raise PermissionError("the sandbox's access token is missing or wrong")
        if sb.state != RUNNING or sid in self.busy:
            raise LookupError(f"The sandbox {sid} is {sb.state}; connect to it first")
        return sb.cid

    # -- the loops ------------------------------------------------------------------------------
    def end_all(self, why: str) -> int:
        with self.lock:
            ids = list(self.items)
        for sid in ids:
            try:
                self.kill(sid)
            except Refusal:
                pass
        if ids:
            log.warning("e2b: %d sandbox(es) ended: %s", len(ids), why)
        return len(ids)

    def reap(self) -> None:
        """Once: STOP ALL ends every sandbox; a sandbox past its end time is ended (or paused)."""
        if self.held():
            self.end_all(HELD_MESSAGE)
            return
        now = _now()
        with self.lock:
            due = [s for s in self.items.values() if s.state == RUNNING and s.end_at <= now and s.id not in self.busy]
        for sb in due:
            try:
                if sb.auto_pause:
                    self.pause(sb.id)
                else:
                    self.kill(sb.id)
            except Refusal as e:
                log.warning("e2b reaper: %s: %s", sb.id, e.message)

    def reaper_loop(self) -> None:
        while not self.stopped.wait(REAP_EVERY_S):
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - the reaper keeps going
                log.exception("e2b reaper")

    def start(self) -> Sandboxes:
        threading.Thread(target=self.reaper_loop, daemon=True, name="e2b-reaper").start()
        return self

    def close(self) -> None:
        self.stopped.set()


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
