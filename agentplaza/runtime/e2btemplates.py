"""Templates and builds of the E2B API: a build runs its steps in a build sandbox of its own, then keeps
the result as a memory snapshot (a checkpoint of the build VM); a sandbox made from the template forks it
and starts warm, with what the steps installed and what the start command left running.

- ``fromImage e2bdev/base`` (the SDKs' default) is the plaza's base image; no other image is pulled.
  ``fromTemplate`` builds on a built template's snapshot, with its environment and working directory.
- Steps run in order (``RUN``, ``ENV``, ``WORKDIR``, ``USER``, ``COPY``); each may run ``STEP_TIMEOUT_S``;
  a non-zero step fails the build; a step's output lines go to the build's log. A ``COPY`` step's files
  are the archive the SDK uploaded for its ``filesHash`` (``runtime/e2bfiles.py``), unpacked in the
  build sandbox and copied as Docker's COPY does (a folder's contents into the destination; a file into
  a destination that ends in ``/`` or is a folder, else as it), then given the step's owner and mode.
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
from typing import Any

from ..commands import e2b as e2b_commands
from ..domain.base import Refusal
from ..domain.e2b import BUILDING, DEFAULT_TAG, ERROR, READY, WAITING, template_agg_id
from ..projections import e2b as e2b_rm
from .e2bfiles import FILES_HASH, FileStore, check_hash

log = logging.getLogger("apid.e2b.templates")

#: The only base image: the plaza's own.
BASE_IMAGE = "e2bdev/base"
#: A step's longest run, the ready command's interval and its longest wait, in seconds.
STEP_TIMEOUT_S, READY_EVERY_S, READY_MAX_S = 30 * 60, 1.0, 10 * 60
#: Where the start command's output goes, in the build sandbox (and so in every sandbox made from it).
START_LOG = "/tmp/e2b-start-cmd.log"
#: What a build's log says when it reused a ready build's snapshot.
BUILD_CACHED = "Build cached"
#: The step types a build runs.
STEP_TYPES = ("RUN", "ENV", "WORKDIR", "USER", "COPY")
#: The fields of a build start the hub serves; ``minFreeDiskMb`` is on the template request.
TRIGGER_FIELDS = frozenset({"fromImage", "fromTemplate", "force", "steps", "startCmd", "readyCmd"})
REQUEST_FIELDS = frozenset({"name", "alias", "tags", "cpuCount", "memoryMB", "minFreeDiskMb", "teamID"})
STEP_FIELDS = frozenset({"type", "args", "force", "filesHash", "forceUpload"})
#: The most log entries one status answer carries (the SDK pages through the rest).
LOG_PAGE = 100


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: UP017


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


def template_view(t: dict, builds: list) -> dict:
    """A template in E2B's shape: its newest build's status (and failure), the tags of its ready builds."""
    newest = builds[-1] if builds else None
    ready = {b["build_id"] for b in builds if b["status"] == READY}
    return {"templateID": t["template_id"], "buildID": newest["build_id"] if newest else "", "names": [t["name"]],
            "aliases": [t["name"]], "public": False, "cpuCount": 1, "memoryMB": 256, "diskSizeMB": 1024,
            "createdAt": _z(t["created_at"]), "buildStatus": newest["status"] if newest else WAITING,
            "buildCount": len(builds), "tags": sorted(tag for tag, bid in t["tags"].items() if bid in ready),
            "reason": (newest["reason"] or {}).get("message") if newest and newest["status"] == ERROR else None}


def _z(at: str) -> str:
    return _iso(dt.datetime.fromisoformat(at.replace("Z", "+00:00")))


def _entry(message: str, level: str = "info", step: str | None = None) -> dict:
    entry = {"timestamp": _iso(dt.datetime.now(dt.timezone.utc)), "message": message, "level": level}  # noqa: UP017
    if step is not None:
        entry["step"] = step
    return entry


class Templates:
    """The templates' actions; what they are is the log's (``commands/e2b.py``, ``projections/e2b.py``).
    A build in progress is this process's thread; its log goes to the log step by step."""

    def __init__(self, sandboxes: Any) -> None:
        self.sbx = sandboxes
        self.lock = threading.RLock()
        self.files = FileStore(sandboxes.hub.folders.data, sandboxes.token_key)

    @property
    def cmds(self):
        return self.sbx.hub.commands

    def _ctx(self):
        return self.sbx.ctx()

    # -- lookups ----------------------------------------------------------------------------------
    def find(self, ref: str) -> tuple[dict, str | None] | None:
        base, tag = split_name(ref)
        t = e2b_rm.template_row(self.sbx.rm, base)
        return (t, tag) if t is not None else None

    def get(self, tid: str) -> dict:
        found = self.find(tid)
        if found is None:
            raise Refusal("e2b_template_not_found", f"template '{tid}' not found")
        return found[0]

    def resolve(self, ref: str) -> dict | None:
        """The ready build a create names (``name``, ``name:tag`` or the template's id), or None."""
        found = self.find(ref)
        if found is None:
            return None
        t, tag = found
        agg = self.sbx.hub.store.get(template_agg_id(t["name"]))  # the one rule for picking a build: the domain's
        bid = agg.pick(tag) if agg is not None and not agg.deleted else None
        b = agg.builds.get(bid) if bid else None
        if b is None or b["status"] != READY:
            raise Refusal("e2b_template_not_found", f"template '{ref}' has no ready build")
        return {"build_id": bid, "template_id": agg.template_id, "cid": b["cid"], "checkpoint": b["checkpoint"],
                "workdir": b["workdir"]}

    def list(self) -> list:
        by = e2b_rm.builds_of(self.sbx.rm)
        return [template_view(t, by.get(t["template_id"], [])) for t in e2b_rm.template_rows(self.sbx.rm)]

    # -- the API ----------------------------------------------------------------------------------
    def request(self, body: dict, actor: str = "hub") -> dict:
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
        bid = secrets.token_hex(8)
        tid = self.sbx.wrote(e2b_commands.request_build(self.cmds, self.sbx.ctx(actor), base,
                                                        "t" + secrets.token_hex(8), bid, list(tags)))
        return {"templateID": tid, "buildID": bid, "public": False, "names": [base], "tags": list(tags),
                "aliases": [base]}

    def file_link(self, tid: str, files_hash: str, base_url: str) -> dict:
        """E2B's TemplateBuildFileUpload: whether the archive is here, else where to upload it."""
        t = self.get(tid)
        if self.files.present(files_hash):
            return {"present": True}
        cap = self.files.capability(t["template_id"], files_hash)
        return {"present": False,
                "url": f"{base_url.rstrip('/')}/e2b/templates/{t['template_id']}/files/{files_hash}?upload={cap}"}

    def check_upload(self, tid: str, files_hash: str, capability: str | None) -> None:
        check_hash(files_hash)
        t = e2b_rm.template_row(self.sbx.rm, tid)
        self.files.check(t["template_id"] if t else tid, files_hash, capability)
        if t is None:
            raise Refusal("e2b_template_not_found", f"template '{tid}' not found")

    def uploaded(self, tid: str, files_hash: str, chunks: list) -> None:
        """Keep a COPY step's archive (checked by ``check_upload``), and say so in the log: the hash, the
        bytes' size and SHA-256, on the template (who uploaded is the link's holder, as the SDK has no key
        here: the actor is the hub)."""
        t = e2b_rm.template_row(self.sbx.rm, tid)
        if t is None:
            raise Refusal("e2b_template_not_found", f"template '{tid}' not found")
        size, sha = self.files.save(files_hash, chunks)
        self.sbx.wrote(e2b_commands.files_uploaded(self.cmds, self.sbx.ctx("hub", "a COPY step's files"),
                                                   t["name"], files_hash, size, sha))

    def _build(self, tid: str, bid: str) -> tuple[dict, dict]:
        t = self.get(tid)
        b = next((x for x in e2b_rm.build_rows(self.sbx.rm, t["template_id"]) if x["build_id"] == bid), None)
        if b is None:
            raise Refusal("e2b_build_not_found", f"build {bid} of template {tid} not found")
        return t, b

    def status(self, tid: str, bid: str, offset: int) -> dict:
        t, b = self._build(tid, bid)
        page = e2b_rm.build_log(self.sbx.rm, bid, offset, LOG_PAGE)
        out = {"templateID": t["template_id"], "buildID": bid, "status": b["status"],
               "logs": [e["message"] for e in page], "logEntries": page}
        if b["reason"]:
            out["reason"] = b["reason"]
        return out

    def trigger(self, tid: str, bid: str, body: dict, actor: str = "hub") -> None:
        t, b = self._build(tid, bid)
        extra = sorted(set(body) - TRIGGER_FIELDS)
        if extra:
            raise Refusal("e2b_field_not_served", f"this hub does not serve the field(s) {', '.join(extra)}")
        if b["status"] != WAITING:
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
        for i, s in enumerate(steps, 1):
            fh = s.get("filesHash")
            if s["type"] == "COPY" and (len(s.get("args") or []) < 2 or not isinstance(fh, str)
                                        or not FILES_HASH.fullmatch(fh) or not self.files.present(fh)):
                raise Refusal("invalid_request", f"the files of COPY step {i} were not uploaded (or it names no "
                                                 "destination)")
        base_build = self.resolve(parent) if parent else None
        if parent and base_build is None:
            raise Refusal("e2b_template_not_found", f"template '{parent}' not found")
        force = bool(body.get("force")) or any(s.get("force") for s in steps)
        cid, drop = self.sbx.wrote(e2b_commands.start_build(self.cmds, self.sbx.ctx(actor), t["name"], bid,
                                                            plan_of(body), force, [_entry(BUILD_CACHED)]))
        self._drop(drop, f"template {t['name']}")
        if cid is not None:
            threading.Thread(target=self._run, args=(t["name"], bid, cid, body, base_build), daemon=True,
                             name=f"e2b-build-{bid}").start()

    # -- a build ----------------------------------------------------------------------------------
    def _run(self, name: str, bid: str, cid: int, body: dict, base: dict | None) -> None:
        pending: list = []

        def say(message: str, level: str = "info", step: str | None = None) -> None:
            pending.append(_entry(message, level, step))

        def flush() -> None:
            if pending:
                self.sbx.wrote(e2b_commands.build_logged(self.cmds, self._ctx(), name, bid, list(pending)))
                pending.clear()

        env: dict = {}
        workdir = base["workdir"] if base else None
        try:
            link = self.sbx.link
            if base is not None:
                link.request("start", timeout=180, cid=cid, identity=f"build:{bid}", role="sandbox",
                             fork_of=base["cid"], checkpoint=base["checkpoint"])
                say(f"Building on template {body.get('fromTemplate')}")
            else:
                link.request("start", timeout=180, cid=cid, identity=f"build:{bid}", role="sandbox", wipe=True)
                say(f"Building from {BASE_IMAGE}, the plaza's base image")
            flush()
            for i, s in enumerate(body.get("steps") or [], 1):
                step, args = str(i), [str(a) for a in (s.get("args") or [])]
                say(f"[{i}] {s['type']} {' '.join(args)}", step=step)
                if s["type"] == "ENV":
                    env.update(dict(zip(args[0::2], args[1::2])))
                elif s["type"] == "WORKDIR":
                    workdir = args[0] if args else None
                    run_in_sandbox(link, cid, f"mkdir -p {shlex.quote(workdir or '/workspace')}", env, None, 60)
                elif s["type"] == "COPY":
                    code, lines = self._copy(link, cid, s["filesHash"], args, workdir)
                    for line in lines:
                        say(line, step=step)
                    if code != 0:
                        raise StepFailed(step, f"step {i} (COPY {' '.join(args[:2])}) exited {code}")
                elif s["type"] == "RUN":
                    code, lines = run_in_sandbox(link, cid, args[0] if args else "true", env, workdir, STEP_TIMEOUT_S)
                    for line in lines:
                        say(line, step=step)
                    if code != 0:
                        raise StepFailed(step, f"step {i} ({args[0] if args else ''}) exited {code}")
                flush()
            if body.get("startCmd"):
                cmd = f"nohup /bin/sh -c {shlex.quote(body['startCmd'])} >> {START_LOG} 2>&1 &"
                run_in_sandbox(link, cid, cmd, env, workdir, 60)
                say(f"Started: {body['startCmd']}")
            if body.get("readyCmd"):
                end = time.monotonic() + READY_MAX_S
                while True:
                    code, _ = run_in_sandbox(link, cid, body["readyCmd"], env, workdir, 60)
                    if code == 0:
                        break
                    if time.monotonic() > end:
                        raise StepFailed("ready", f"the ready command did not exit 0 within {READY_MAX_S:.0f} s")
                    time.sleep(READY_EVERY_S)
                say("Ready command passed")
            from .e2bgate import envd_call  # noqa: PLC0415

            envd_call(link, cid, "POST", "/init", json.dumps({"envVars": env}).encode())
            checkpoint = link.request("checkpoint", timeout=180, cid=cid, label=f"e2b build {bid}")["name"]
            link.request("stop", timeout=60, cid=cid)
            say(f"Snapshot {checkpoint} kept")
            flush()
            self._drop(self.sbx.wrote(e2b_commands.build_ready(self.cmds, self._ctx(), name, bid, checkpoint, workdir)),
                       f"template {name}")
        except StepFailed as e:
            self._fail(name, bid, e.message, e.step, pending)
        except Exception as e:  # noqa: BLE001 - a build that breaks says why in its status
            self._fail(name, bid, f"{type(e).__name__}: {e}", None, pending)

    def _copy(self, link: Any, cid: int, files_hash: str, args: list, workdir: str | None) -> tuple[int, list]:
        """A COPY step: its archive into the build sandbox, unpacked, copied to the destination."""
        from .e2bgate import envd_call  # noqa: PLC0415

        src, dest = args[0], args[1]
        user, mode = (args[2] if len(args) > 2 else ""), (args[3] if len(args) > 3 else "")
        tmp = f"/tmp/e2b-copy-{files_hash[:16]}"
        status, _ = envd_call(link, cid, "POST", f"/files?path={tmp}.tar", self.files.read(files_hash),
                              {"content-type": "application/octet-stream"}, timeout=600)
        if status >= 300:
            return 1, [f"the build sandbox's daemon answered {status} to the COPY step's archive"]
        glob = any(c in src for c in "*?[")
        source = f'"$S"/{src}' if glob else f'"$S"/{shlex.quote(src)}'
        script = f"""set -e
S={tmp}; mkdir -p "$S"; tar -xf "$S.tar" -C "$S"; rm -f "$S.tar"
D={shlex.quote(dest)}
for P in {source}; do
  if [ -d "$P" ]; then mkdir -p "$D"; cp -a "$P/." "$D/"; T="$D"
  elif [ "${{D%/}}" != "$D" ] || [ -d "$D" ]; then mkdir -p "$D"; cp -a "$P" "$D/"; T="${{D%/}}/$(basename "$P")"
  else mkdir -p "$(dirname "$D")"; cp -a "$P" "$D"; T="$D"; fi
  {f'chown -R {shlex.quote(user)} "$T"' if user else 'true'}
  {f'chmod -R {shlex.quote(mode)} "$T"' if mode else 'true'}
done
rm -rf "$S"
"""
        return run_in_sandbox(link, cid, script, {}, workdir, STEP_TIMEOUT_S)

    def _fail(self, name: str, bid: str, message: str, step: str | None, pending: list) -> None:
        pending.append(_entry(message, "error", step))
        try:
            self.sbx.wrote(e2b_commands.build_logged(self.cmds, self._ctx(), name, bid, list(pending)))
            self._drop(self.sbx.wrote(e2b_commands.build_failed(self.cmds, self._ctx(), name, bid, message, step)),
                       f"build {bid}")
        except Refusal as r:  # the template was deleted while it built
            log.warning("e2b: build %s of %s: %s", bid, name, r.message)

    def _drop(self, cids: list, what: str) -> None:
        for cid in cids:
            self._delete_vm(cid, what)

    def _delete_vm(self, cid: int, what: str) -> None:
        try:
            self.sbx.link.request("delete", timeout=60, cid=cid)
        except Exception as e:  # noqa: BLE001 - the node may have lost it already; nothing else depends on it
            log.warning("e2b: removing the VM of %s failed: %s", what, e)

    def delete(self, tid: str, actor: str = "hub") -> None:
        t = self.get(tid)
        self._drop(self.sbx.wrote(e2b_commands.delete_template(self.cmds, self.sbx.ctx(actor), t["name"])),
                   f"template {t['template_id']}")

    def reconcile(self, machines: dict) -> None:
        """At start: a build that was building in a hub that stopped has failed (its thread went with it)."""
        for t in e2b_rm.template_rows(self.sbx.rm):
            for b in e2b_rm.build_rows(self.sbx.rm, t["template_id"]):
                if b["status"] == BUILDING and not machines.get(b["cid"]):
                    self._fail(t["name"], b["build_id"], "the hub stopped while this build ran", None, [])


class StepFailed(Exception):
    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step, self.message = step, message
