"""Templates and builds of the E2B API: a build runs its steps in a build sandbox of its own, then keeps
the result as a memory snapshot (a checkpoint of the build VM); a sandbox made from the template forks it
and starts warm, with what the steps installed and what the start command left running.

- ``fromImage e2bdev/base`` (the SDKs' default) is the plaza's base image; no other image is pulled.
  ``fromTemplate`` builds on a built template's snapshot, with its environment and working directory.
- Steps run in order (``RUN``, ``ENV``, ``WORKDIR``, ``USER``); each may run ``STEP_TIMEOUT_S``; a
  non-zero step fails the build; a step's output lines go to the build's log. ``COPY`` (file uploads)
  is refused: the hub has no file store for builds yet.
- After the steps the start command runs in the background, appending to ``START_LOG``; the ready
  command runs every ``READY_EVERY_S`` until it exits 0, for at most ``READY_MAX_S``.
- **Reuse**: a build whose plan (base, steps, start and ready commands, shape) matches a ready build of
  the same template is ready at once, reusing its snapshot; its log says ``Build cached``. ``force``
  (the SDK's ``skip_cache``, or a step's ``force``) builds afresh.
- **Tags**: ``name:tag``; no tag is ``default``. When a build is ready, its tags move to it. A bare name
  is the default build, else the newest ready build. An older ready build left with no tags is removed
  with its snapshot unless another build holds that snapshot.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import secrets
import shlex
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..domain.base import Refusal

log = logging.getLogger("apid.e2b.templates")

#: The only base image: the plaza's own.
BASE_IMAGE = "e2bdev/base"
#: A step's longest run, the ready command's interval and its longest wait, in seconds.
STEP_TIMEOUT_S, READY_EVERY_S, READY_MAX_S = 30 * 60, 1.0, 10 * 60
#: Where the start command's output goes, in the build sandbox (and so in every sandbox made from it).
START_LOG = "/tmp/e2b-start-cmd.log"
#: What a build's log says when it reused a ready build's snapshot.
BUILD_CACHED = "Build cached"
#: The tag a build gets when it names none.
DEFAULT_TAG = "default"
#: The step types a build runs.
STEP_TYPES = ("RUN", "ENV", "WORKDIR", "USER")
#: The fields of a build start the hub serves; ``minFreeDiskMb`` is on the template request.
TRIGGER_FIELDS = frozenset({"fromImage", "fromTemplate", "force", "steps", "startCmd", "readyCmd"})
REQUEST_FIELDS = frozenset({"name", "alias", "tags", "cpuCount", "memoryMB", "minFreeDiskMb", "teamID"})
STEP_FIELDS = frozenset({"type", "args", "force", "filesHash", "forceUpload"})
#: The most log entries one status answer carries (the SDK pages through the rest).
LOG_PAGE = 100


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: UP017


@dataclass
class Build:
    id: str
    template_id: str
    tags: list
    status: str = "waiting"
    plan: str = ""
    logs: list = field(default_factory=list)
    reason: dict | None = None
    cid: int | None = None
    checkpoint: str | None = None
    env: dict = field(default_factory=dict)
    workdir: str | None = None
    created: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))  # noqa: UP017

    def log(self, message: str, level: str = "info", step: str | None = None) -> None:
        entry = {"timestamp": _iso(dt.datetime.now(dt.timezone.utc)), "message": message, "level": level}  # noqa: UP017
        if step is not None:
            entry["step"] = step
        self.logs.append(entry)

    def status_view(self, offset: int) -> dict:
        page = self.logs[offset:offset + LOG_PAGE]
        out = {"templateID": self.template_id, "buildID": self.id, "status": self.status,
               "logs": [e["message"] for e in page], "logEntries": page}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Template:
    id: str
    name: str
    builds: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)  # tag -> build id

    def ready(self) -> list:
        return [b for b in self.builds if b.status == "ready"]

    def pick(self, tag: str | None) -> Build | None:
        """``name:tag`` is the build with that tag; a bare name the default build, else the newest ready."""
        by_id = {b.id: b for b in self.builds}
        if tag is not None:
            return by_id.get(self.tags.get(tag, ""))
        b = by_id.get(self.tags.get(DEFAULT_TAG, ""))
        return b if b is not None else (self.ready()[-1] if self.ready() else None)

    def row(self) -> dict:
        newest = self.builds[-1] if self.builds else None
        return {"templateID": self.id, "buildID": newest.id if newest else "", "names": [self.name],
                "aliases": [self.name], "public": False, "cpuCount": 1, "memoryMB": 256, "diskSizeMB": 1024,
                "createdAt": _iso(self.builds[0].created) if self.builds else None,
                "buildStatus": newest.status if newest else "waiting", "buildCount": len(self.builds),
                "tags": sorted(t for t, bid in self.tags.items() if any(b.id == bid for b in self.ready())),
                "reason": (newest.reason or {}).get("message") if newest and newest.status == "error" else None}


def split_name(name: str) -> tuple[str, str | None]:
    base, sep, tag = name.partition(":")
    return base, (tag if sep else None)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name or len(name) > 128 or \
            any(c not in "abcdefghijklmnopqrstuvwxyz0123456789-_./" for c in name.lower()):
        raise Refusal("invalid_name", "a template's name is 1 to 128 of letters, digits, - _ . /")
    return name


def plan_of(body: dict) -> str:
    """The plan two builds must share to reuse one snapshot: base, steps (with file hashes), start and
    ready commands, shape."""
    steps = [{k: s.get(k) for k in ("type", "args", "filesHash")} for s in body.get("steps") or []]
    plan = {"fromImage": body.get("fromImage"), "fromTemplate": body.get("fromTemplate"), "steps": steps,
            "startCmd": body.get("startCmd"), "readyCmd": body.get("readyCmd"), "shape": [1, 256, 1024]}
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def run_in_sandbox(link: Any, cid: int, cmd: str, env: dict, cwd: str | None, timeout: float) -> tuple[int, list]:
    """Run ``sh -c cmd`` through the sandbox's daemon; its exit code and its output lines."""
    from .e2bgate import envd_call  # noqa: PLC0415 - the gateway module imports the sandboxes' module

    req = {"process": {"cmd": "/bin/sh", "args": ["-c", cmd], "envs": env, **({"cwd": cwd} if cwd else {})}}
    msg = json.dumps(req).encode()
    status, body = envd_call(link, cid, "POST", "/process.Process/Start", struct.pack(">BI", 0, len(msg)) + msg,
                             {"content-type": "application/connect+json"}, timeout=timeout)
    if status != 200:
        return 127, [f"the sandbox's daemon answered {status}: {body[:200]!r}"]
    out, code, i = b"", 1, 0
    import base64  # noqa: PLC0415

    while i + 5 <= len(body):
        flags, n = struct.unpack(">BI", body[i:i + 5])
        ev = json.loads(body[i + 5:i + 5 + n] or b"{}")
        i += 5 + n
        if flags & 0x02:
            if ev.get("error"):
                return 127, [ev["error"].get("message", "error")]
            break
        e = ev.get("event") or {}
        data = e.get("data") or {}
        for k in ("stdout", "stderr"):
            if k in data:
                out += base64.b64decode(data[k])
        if "end" in e:
            code = int(e["end"].get("exitCode") or 0)
    return code, out.decode("utf-8", "replace").splitlines()


class Templates:
    def __init__(self, sandboxes: Any) -> None:
        self.sbx = sandboxes
        self.lock = threading.RLock()
        self.items: dict[str, Template] = {}

    # -- lookups ----------------------------------------------------------------------------------
    def find(self, ref: str) -> tuple[Template, str | None] | None:
        base, tag = split_name(ref)
        with self.lock:
            t = self.items.get(base) or next((x for x in self.items.values() if x.name == base), None)
        return (t, tag) if t is not None else None

    def get(self, tid: str) -> Template:
        found = self.find(tid)
        if found is None:
            raise Refusal("e2b_template_not_found", f"template '{tid}' not found")
        return found[0]

    def resolve(self, ref: str) -> Build | None:
        """The ready build a create names (``name``, ``name:tag`` or the template's id), or None."""
        found = self.find(ref)
        if found is None:
            return None
        t, tag = found
        b = t.pick(tag)
        if b is None or b.status != "ready":
            raise Refusal("e2b_template_not_found", f"template '{ref}' has no ready build")
        return b

    def list(self) -> list:
        with self.lock:
            return [t.row() for t in self.items.values()]

    # -- the API ----------------------------------------------------------------------------------
    def request(self, body: dict) -> dict:
        extra = sorted(set(body) - REQUEST_FIELDS)
        if extra:
            raise Refusal("e2b_field_not_served", f"this hub does not serve the field(s) {', '.join(extra)}")
        name = body.get("name") or body.get("alias")
        base, tag = split_name(name if isinstance(name, str) else "")
        check_name(base)
        tags = body.get("tags") or ([tag] if tag else [DEFAULT_TAG])
        if not isinstance(tags, list) or not all(isinstance(x, str) and x for x in tags):
            raise Refusal("invalid_request", "tags is a list of names")
        for k in ("cpuCount", "memoryMB"):
            if body.get(k) not in (None, 1 if k == "cpuCount" else 256):
                raise Refusal("e2b_field_not_served", f"{k} other than the plaza's sandbox shape (1 vCPU, 256 MiB)")
        # minFreeDiskMb is accepted and not applied (the workspace is a fixed 1 GiB layer)
        with self.lock:
            found = self.find(base)
            t = found[0] if found else Template(id="t" + secrets.token_hex(8), name=base)
            self.items[t.id] = t
            b = Build(id=secrets.token_hex(8), template_id=t.id, tags=list(tags))
            t.builds.append(b)
        return {"templateID": t.id, "buildID": b.id, "public": False, "names": [t.name], "tags": b.tags,
                "aliases": [t.name]}

    def _build(self, tid: str, bid: str) -> tuple[Template, Build]:
        t = self.get(tid)
        b = next((x for x in t.builds if x.id == bid), None)
        if b is None:
            raise Refusal("e2b_build_not_found", f"build {bid} of template {tid} not found")
        return t, b

    def status(self, tid: str, bid: str, offset: int) -> dict:
        return self._build(tid, bid)[1].status_view(offset)

    def trigger(self, tid: str, bid: str, body: dict) -> None:
        t, b = self._build(tid, bid)
        extra = sorted(set(body) - TRIGGER_FIELDS)
        if extra:
            raise Refusal("e2b_field_not_served", f"this hub does not serve the field(s) {', '.join(extra)}")
        if b.status != "waiting":
            raise Refusal("e2b_build_started", f"build {bid} was started already")
        image, parent = body.get("fromImage"), body.get("fromTemplate")
        if parent is None and image not in (None, BASE_IMAGE):
            raise Refusal("e2b_image_not_served", f"only {BASE_IMAGE} (the plaza's base image) is served, not {image}")
        steps = body.get("steps") or []
        if not isinstance(steps, list):
            raise Refusal("invalid_request", "steps is a list")
        for s in steps:
            if not isinstance(s, dict) or set(s) - STEP_FIELDS or s.get("type") not in STEP_TYPES or \
                    not isinstance(s.get("args") or [], list):
                kind = s.get("type") if isinstance(s, dict) else s
                raise Refusal("e2b_step_not_served", f"a build step of type {kind!r} is not served "
                                                     f"(only {', '.join(STEP_TYPES)})")
        base_build = self.resolve(parent) if parent else None
        if parent and base_build is None:
            raise Refusal("e2b_template_not_found", f"template '{parent}' not found")
        b.plan = plan_of(body)
        force = bool(body.get("force")) or any(s.get("force") for s in steps)
        same = next((x for x in reversed(t.ready()) if x.plan == b.plan), None)
        if same is not None and not force:
            b.cid, b.checkpoint, b.env, b.workdir = same.cid, same.checkpoint, dict(same.env), same.workdir
            b.log(BUILD_CACHED)
            self._ready(t, b)
            return
        b.status = "building"
        threading.Thread(target=self._run, args=(t, b, body, base_build), daemon=True,
                         name=f"e2b-build-{b.id}").start()

    # -- a build ----------------------------------------------------------------------------------
    def _run(self, t: Template, b: Build, body: dict, base: Build | None) -> None:
        link = self.sbx.link
        cid = self.sbx.new_cid()
        b.cid = cid
        try:
            if base is not None:
                b.env, b.workdir = dict(base.env), base.workdir
                link.request("start", timeout=180, cid=cid, identity=f"build:{b.id}", role="sandbox",
                             fork_of=base.cid, checkpoint=base.checkpoint)
                b.log(f"Building on template {body.get('fromTemplate')}")
            else:
                link.request("start", timeout=180, cid=cid, identity=f"build:{b.id}", role="sandbox", wipe=True)
                b.log(f"Building from {BASE_IMAGE}, the plaza's base image")
            for i, s in enumerate(body.get("steps") or [], 1):
                step, args = str(i), [str(a) for a in (s.get("args") or [])]
                b.log(f"[{i}] {s['type']} {' '.join(args)}", step=step)
                if s["type"] == "ENV":
                    b.env.update(dict(zip(args[0::2], args[1::2])))
                elif s["type"] == "WORKDIR":
                    b.workdir = args[0] if args else None
                    run_in_sandbox(link, cid, f"mkdir -p {shlex.quote(b.workdir or '/workspace')}", b.env, None, 60)
                elif s["type"] == "RUN":
                    code, lines = run_in_sandbox(link, cid, args[0] if args else "true", b.env, b.workdir,
                                                 STEP_TIMEOUT_S)
                    for line in lines:
                        b.log(line, step=step)
                    if code != 0:
                        raise StepFailed(step, f"step {i} ({args[0] if args else ''}) exited {code}")
            if body.get("startCmd"):
                cmd = f"nohup /bin/sh -c {shlex.quote(body['startCmd'])} >> {START_LOG} 2>&1 &"
                run_in_sandbox(link, cid, cmd, b.env, b.workdir, 60)
                b.log(f"Started: {body['startCmd']}")
            if body.get("readyCmd"):
                end = time.monotonic() + READY_MAX_S
                while True:
                    code, _ = run_in_sandbox(link, cid, body["readyCmd"], b.env, b.workdir, 60)
                    if code == 0:
                        break
                    if time.monotonic() > end:
                        raise StepFailed("ready", f"the ready command did not exit 0 within {READY_MAX_S:.0f} s")
                    time.sleep(READY_EVERY_S)
                b.log("Ready command passed")
            from .e2bgate import envd_call  # noqa: PLC0415

            envd_call(link, cid, "POST", "/init", json.dumps({"envVars": b.env}).encode())
            b.checkpoint = link.request("checkpoint", timeout=180, cid=cid, label=f"e2b build {b.id}")["name"]
            link.request("stop", timeout=60, cid=cid)
            b.log(f"Snapshot {b.checkpoint} kept")
            self._ready(t, b)
        except StepFailed as e:
            self._fail(b, e.message, e.step)
        except Exception as e:  # noqa: BLE001 - a build that breaks says why in its status
            self._fail(b, f"{type(e).__name__}: {e}", None)

    def _fail(self, b: Build, message: str, step: str | None) -> None:
        b.log(message, level="error", step=step)
        b.status = "error"
        b.reason = {"message": message, **({"step": step} if step else {})}
        self._drop(b)

    def _ready(self, t: Template, b: Build) -> None:
        with self.lock:
            b.status = "ready"
            for tag in b.tags:
                t.tags[tag] = b.id
            tagged = set(t.tags.values())
            gone = [x for x in t.ready() if x.id not in tagged and x is not b and x.id != b.id]
            for x in gone:  # an older ready build with no tags left goes, unless another holds its snapshot
                t.builds.remove(x)
                if not any(y.cid == x.cid for y in t.builds):
                    self._drop(x)

    def _drop(self, b: Build) -> None:
        if b.cid is not None:
            self._delete_vm(b.cid, f"build {b.id}")

    def _delete_vm(self, cid: int, what: str) -> None:
        try:
            self.sbx.link.request("delete", timeout=60, cid=cid)
        except Exception as e:  # noqa: BLE001 - the node may have lost it already; nothing else depends on it
            log.warning("e2b: removing the VM of %s failed: %s", what, e)

    def delete(self, tid: str) -> None:
        t = self.get(tid)
        with self.lock:
            self.items.pop(t.id, None)
        for cid in {b.cid for b in t.builds if b.cid is not None}:
            self._delete_vm(cid, f"template {t.id}")


class StepFailed(Exception):
    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step, self.message = step, message
