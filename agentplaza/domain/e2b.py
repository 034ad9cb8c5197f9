"""The E2B API's sandboxes, snapshots and templates, as aggregates: everything the hub knows of them is in
the log (family ``e2b``), so the live bus carries each change, a hub restart loses none, and the read
model (``projections/e2b.py``) is rebuilt from event 1. The VMs themselves are the node's; the runtime
(``runtime/e2b.py``) keeps only its live connections and asks the node what still runs.

- ``E2bCids``: the CIDs given to sandbox and build VMs, from ``FIRST_SANDBOX_CID`` up, one each, never
  twice (a restart goes on from the last one given).
- ``E2bSandbox``: created (starting), started (running), paused (with its memory, or cold: the disk only,
  resumed by a cold boot), resumed, its timeout and end time, its network rules, ended with a reason
  (``END_REASONS``). An ended sandbox is not found.
- ``E2bSnapshot``: a checkpoint of a sandbox's VM, with its names (a create names it by id, or by a name
  exactly one snapshot has).
- ``E2bTemplate``: one per name (a deleted name may be made again, with a new id); its builds in order:
  requested (with tags), started (a CID) or cached (another ready build's snapshot), logged, ready
  (the tags move to it; an older ready build left with no tags is removed) or failed; deleted; and each
  archive a COPY step uploaded to it (``FilesUploaded``: the step's files hash, the archive's size and
  SHA-256; the bytes are kept in the data folder, never in the log), so the log tells a build's inputs.

No secret enters an event: neither the sandbox's environment variables nor its access token (the hub
derives that from a secret of its own, ``runtime/e2b.py``).
"""

from __future__ import annotations

import datetime as dt
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id

#: Sandbox and build CIDs start here (agents' are far below), one more for each.
FIRST_SANDBOX_CID = 60000
#: A sandbox's time to live when the request names none, and the longest it may be, in seconds.
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 300, 24 * 3600
#: A sandbox's states: booting (not listed, not reachable), E2B's two, and ended (kept as history).
STARTING, RUNNING, PAUSED, ENDED = "starting", "running", "paused", "ended"
#: Why a sandbox ended: a kill (by its key or the owner), its end time, STOP ALL, a VM that did not
#: start, and a VM that was gone when the hub started again (its memory went with the node).
END_REASONS = ("killed", "timeout", "stop_all", "failed", "vm_gone")
#: A build's states (E2B's).
WAITING, BUILDING, READY, ERROR = "waiting", "building", "ready", "error"
#: The tag a build gets when it names none.
DEFAULT_TAG = "default"
#: The most log entries one event carries, and the longest message kept.
LOG_ENTRIES_PER_EVENT_MAX, LOG_MESSAGE_CHARS_MAX = 200, 2000

#: Kept so that logs written before the sandboxes had aggregates of their own still read.
SANDBOX_EVENTS = ("created", "paused", "resumed", "timeout", "network", "ended")

CIDS_ID = fixed_id("e2b-cids")


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def after(ctx: Context, seconds: int) -> str:
    return iso(ctx.at + dt.timedelta(seconds=seconds))


def check_timeout(seconds: int, lo: int = 1) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not lo <= seconds <= MAX_TIMEOUT_S:
        raise Refusal("invalid_request", f"timeout is {lo} to {MAX_TIMEOUT_S} seconds")
    return seconds


def sandbox_agg_id(sandbox_id: str) -> uuid.UUID:
    return fixed_id(f"e2b-sandbox:{sandbox_id}")


def snapshot_agg_id(snapshot_id: str) -> uuid.UUID:
    return fixed_id(f"e2b-snapshot:{snapshot_id}")


def template_agg_id(name: str) -> uuid.UUID:
    return fixed_id(f"e2b-template:{name}")


def sandbox_record_id(sandbox_id: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:e2b-sandbox:{sandbox_id}")


class SandboxRecord(PlazaAggregate):
    """Written before the sandboxes had aggregates (no longer written; old logs still read)."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        sandbox_id: str
        cid: int
        template: str

    class Happened(PlazaAggregate.Event):
        cid: int
        what: str
        detail: dict

        def apply(self, s: SandboxRecord) -> None:
            s.last = self.what

    def __init__(self, sandbox_id: str, cid: int, template: str):
        self.sandbox_id, self.cid, self.template = sandbox_id, cid, template
        self.last = "created"


class E2bCids(PlazaAggregate):
    """The CIDs given to sandbox and build VMs."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        first: int

    class Allotted(PlazaAggregate.Event):
        cid: int
        to: str

        def apply(self, c: E2bCids) -> None:
            c.next = self.cid + 1

    def __init__(self, first: int):
        self.next = first

    @classmethod
    def open(cls, ctx: Context) -> E2bCids:
        return cls.start(ctx, id=CIDS_ID, first=FIRST_SANDBOX_CID)

    def allot(self, ctx: Context, to: str) -> int:
        cid = self.next
        self.record(E2bCids.Allotted, ctx, cid=cid, to=to)
        return cid


class E2bSandbox(PlazaAggregate):
    """One sandbox: its VM's CID, what it was made from, its key, metadata, end time and rules."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        sandbox_id: str
        cid: int
        template_id: str
        alias: str
        client_id: str
        metadata: dict
        timeout_s: int
        auto_pause: bool
        end_at: str
        allow_out: list
        deny_out: list
        #: The snapshot or build it forks ("" for the base image).
        source: str
        #: Whether an auto-pause keeps the memory (E2B's ``autoPauseMemory``); false: the disk only.
        auto_pause_memory: bool = True

    class Started(PlazaAggregate.Event):
        boot_s: float

        def apply(self, s: E2bSandbox) -> None:
            s.state = RUNNING

    class Paused(PlazaAggregate.Event):
        #: False: a cold pause, the disk only (the guest flushed first); a resume boots it cold.
        memory: bool = True

        def apply(self, s: E2bSandbox) -> None:
            s.state, s.cold = PAUSED, not self.memory

    class Resumed(PlazaAggregate.Event):
        end_at: str
        auto_pause: bool

        def apply(self, s: E2bSandbox) -> None:
            s.state, s.end_at, s.auto_pause, s.cold = RUNNING, self.end_at, self.auto_pause, False

    class TimeoutSet(PlazaAggregate.Event):
        timeout_s: int
        end_at: str

        def apply(self, s: E2bSandbox) -> None:
            s.timeout_s, s.end_at = self.timeout_s, self.end_at

    class NetworkSet(PlazaAggregate.Event):
        allow_out: list
        deny_out: list

    class Ended(PlazaAggregate.Event):
        #: One of ``END_REASONS`` (``reason`` is the person's why, on every event).
        cause: str
        message: str

        def apply(self, s: E2bSandbox) -> None:
            s.state = ENDED

    def __init__(self, sandbox_id: str, cid: int, template_id: str, alias: str, client_id: str, metadata: dict,
                 timeout_s: int, auto_pause: bool, end_at: str, allow_out: list, deny_out: list, source: str,
                 auto_pause_memory: bool = True):
        self.sandbox_id, self.cid, self.template_id, self.alias = sandbox_id, cid, template_id, alias
        self.timeout_s, self.auto_pause, self.end_at = timeout_s, auto_pause, end_at
        self.source, self.auto_pause_memory = source, auto_pause_memory
        self.state, self.cold = STARTING, False

    @classmethod
    def open(cls, ctx: Context, *, sandbox_id: str, cid: int, template_id: str, alias: str, client_id: str,
             metadata: dict, timeout_s: int, auto_pause: bool, network: dict, source: str,
             auto_pause_memory: bool = True) -> E2bSandbox:
        check_timeout(timeout_s)
        return cls.start(ctx, id=sandbox_agg_id(sandbox_id), sandbox_id=sandbox_id, cid=cid,
                         template_id=template_id, alias=alias, client_id=client_id, metadata=dict(metadata),
                         timeout_s=timeout_s, auto_pause=auto_pause, end_at=after(ctx, timeout_s),
                         allow_out=list(network.get("allowOut") or []), deny_out=list(network.get("denyOut") or []),
                         source=source, auto_pause_memory=bool(auto_pause_memory))

    def _live(self) -> None:
        if self.state == ENDED:
            raise Refusal("e2b_sandbox_not_found", f"sandbox {self.sandbox_id} not found")

    def started(self, ctx: Context, boot_s: float) -> None:
        self._live()
        if self.state != STARTING:
            raise Refusal("e2b_sandbox_running", f"sandbox {self.sandbox_id} was started already")
        self.record(E2bSandbox.Started, ctx, boot_s=float(boot_s))

    def pause(self, ctx: Context, memory: bool = True) -> None:
        self._live()
        if self.state == PAUSED:
            raise Refusal("e2b_sandbox_paused", f"sandbox {self.sandbox_id} is already paused")
        if self.state == STARTING:
            raise Refusal("e2b_sandbox_busy", f"sandbox {self.sandbox_id} is being started; try again")
        self.record(E2bSandbox.Paused, ctx, memory=bool(memory))

    def resume(self, ctx: Context, timeout_s: int | None, auto_pause: bool | None) -> None:
        self._live()
        if self.state != PAUSED:
            raise Refusal("e2b_sandbox_running", f"sandbox {self.sandbox_id} is not paused")
        ttl = self.timeout_s if timeout_s is None else check_timeout(timeout_s)
        self.record(E2bSandbox.Resumed, ctx, end_at=after(ctx, ttl),
                    auto_pause=self.auto_pause if auto_pause is None else bool(auto_pause))

    def set_timeout(self, ctx: Context, seconds: int) -> None:
        self._live()
        self.record(E2bSandbox.TimeoutSet, ctx, timeout_s=check_timeout(seconds, 0), end_at=after(ctx, seconds))

    def extend(self, ctx: Context, seconds: int) -> None:
        """A connect with a timeout: the end time moves later, never earlier."""
        self._live()
        end = after(ctx, check_timeout(seconds))
        if end > self.end_at:
            self.record(E2bSandbox.TimeoutSet, ctx, timeout_s=self.timeout_s, end_at=end)

    def set_network(self, ctx: Context, network: dict) -> None:
        self._live()
        self.record(E2bSandbox.NetworkSet, ctx, allow_out=list(network.get("allowOut") or []),
                    deny_out=list(network.get("denyOut") or []))

    def end(self, ctx: Context, reason: str, message: str = "") -> None:
        if reason not in END_REASONS:
            raise ValueError(f"no end reason {reason!r}")
        self._live()
        self.record(E2bSandbox.Ended, ctx, cause=reason, message=message[:LOG_MESSAGE_CHARS_MAX])


class E2bSnapshot(PlazaAggregate):
    """A checkpoint of a sandbox's VM; a create that names it forks it."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        snapshot_id: str
        names: list
        sandbox_id: str
        cid: int
        checkpoint: str
        template_id: str
        memory: bool

    def __init__(self, snapshot_id: str, names: list, sandbox_id: str, cid: int, checkpoint: str,
                 template_id: str, memory: bool):
        self.snapshot_id, self.names, self.cid, self.checkpoint = snapshot_id, names, cid, checkpoint

    @classmethod
    def take(cls, ctx: Context, *, snapshot_id: str, name: str | None, sandbox_id: str, cid: int, checkpoint: str,
             template_id: str, memory: bool) -> E2bSnapshot:
        if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 128):
            raise Refusal("invalid_name", "a snapshot's name is 1 to 128 characters")
        return cls.start(ctx, id=snapshot_agg_id(snapshot_id), snapshot_id=snapshot_id, names=[name] if name else [],
                         sandbox_id=sandbox_id, cid=cid, checkpoint=checkpoint, template_id=template_id,
                         memory=memory)


def cut_entries(entries: list) -> list:
    """Log entries as an event keeps them: at most ``LOG_ENTRIES_PER_EVENT_MAX``, each message cut."""
    return [{**e, "message": str(e.get("message", ""))[:LOG_MESSAGE_CHARS_MAX]}
            for e in entries[:LOG_ENTRIES_PER_EVENT_MAX]]


class E2bTemplate(PlazaAggregate):
    """One template name and its builds."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        template_id: str
        name: str

    class Renewed(PlazaAggregate.Event):
        """A deleted name made again: a new template id, no builds."""

        template_id: str
        name: str

        def apply(self, t: E2bTemplate) -> None:
            t.template_id, t.deleted, t.builds, t.tags = self.template_id, False, {}, {}

    class BuildRequested(PlazaAggregate.Event):
        template_id: str
        build_id: str
        tags: list

        def apply(self, t: E2bTemplate) -> None:
            t.builds[self.build_id] = {"status": WAITING, "tags": list(self.tags), "plan": "", "cid": None,
                                       "checkpoint": None, "workdir": None}

    class BuildStarted(PlazaAggregate.Event):
        template_id: str
        build_id: str
        plan: str
        cid: int

        def apply(self, t: E2bTemplate) -> None:
            t.builds[self.build_id].update(status=BUILDING, plan=self.plan, cid=self.cid)

    class BuildCached(PlazaAggregate.Event):
        """Ready at once: the plan matched a ready build's, whose snapshot it shares."""

        template_id: str
        build_id: str
        plan: str
        from_build: str

        def apply(self, t: E2bTemplate) -> None:
            src = t.builds[self.from_build]
            t.builds[self.build_id].update(status=READY, plan=self.plan, cid=src["cid"],
                                           checkpoint=src["checkpoint"], workdir=src["workdir"])
            t._move_tags(self.build_id)

    class BuildLogged(PlazaAggregate.Event):
        template_id: str
        build_id: str
        entries: list

    class BuildReady(PlazaAggregate.Event):
        template_id: str
        build_id: str
        checkpoint: str
        workdir: str | None

        def apply(self, t: E2bTemplate) -> None:
            t.builds[self.build_id].update(status=READY, checkpoint=self.checkpoint, workdir=self.workdir)
            t._move_tags(self.build_id)

    class BuildFailed(PlazaAggregate.Event):
        template_id: str
        build_id: str
        message: str
        step: str | None

        def apply(self, t: E2bTemplate) -> None:
            t.builds[self.build_id]["status"] = ERROR

    class BuildRemoved(PlazaAggregate.Event):
        template_id: str
        build_id: str

        def apply(self, t: E2bTemplate) -> None:
            t.builds.pop(self.build_id, None)

    class Deleted(PlazaAggregate.Event):
        template_id: str

        def apply(self, t: E2bTemplate) -> None:
            t.deleted = True

    class FilesUploaded(PlazaAggregate.Event):
        """A COPY step's archive, uploaded: the step's ``filesHash`` (the SDK's), the bytes' size and SHA-256."""

        template_id: str
        files_hash: str
        size: int
        sha256: str

    def __init__(self, template_id: str, name: str):
        self.template_id, self.name = template_id, name
        self.deleted = False
        self.builds: dict[str, dict] = {}  # in the order they were asked for
        self.tags: dict[str, str] = {}  # tag -> build id

    def _move_tags(self, build_id: str) -> None:
        for tag in self.builds[build_id]["tags"]:
            self.tags[tag] = build_id

    @classmethod
    def open(cls, ctx: Context, template_id: str, name: str) -> E2bTemplate:
        return cls.start(ctx, id=template_agg_id(name), template_id=template_id, name=name)

    def renew(self, ctx: Context, template_id: str) -> None:
        if self.deleted:
            self.record(E2bTemplate.Renewed, ctx, template_id=template_id, name=self.name)

    def _live(self) -> None:
        if self.deleted:
            raise Refusal("e2b_template_not_found", f"template '{self.name}' not found")

    def files_uploaded(self, ctx: Context, files_hash: str, size: int, sha256: str) -> None:
        self._live()
        self.record(E2bTemplate.FilesUploaded, ctx, template_id=self.template_id, files_hash=files_hash,
                    size=int(size), sha256=sha256)

    def build(self, build_id: str) -> dict:
        self._live()
        b = self.builds.get(build_id)
        if b is None:
            raise Refusal("e2b_build_not_found", f"build {build_id} of template {self.template_id} not found")
        return b

    def ready(self) -> list[str]:
        return [bid for bid, b in self.builds.items() if b["status"] == READY]

    def pick(self, tag: str | None) -> str | None:
        """``name:tag`` is the build with that tag; a bare name the default build, else the newest ready."""
        if tag is not None:
            return self.tags.get(tag)
        ready = self.ready()
        return self.tags.get(DEFAULT_TAG) or (ready[-1] if ready else None)

    def request(self, ctx: Context, build_id: str, tags: list) -> None:
        self._live()
        if not tags or not all(isinstance(x, str) and x for x in tags):
            raise Refusal("invalid_request", "tags is a list of names")
        self.record(E2bTemplate.BuildRequested, ctx, template_id=self.template_id, build_id=build_id, tags=list(tags))

    def same_plan(self, plan: str) -> str | None:
        """The newest ready build with this plan, or None."""
        return next((bid for bid in reversed(self.ready()) if self.builds[bid]["plan"] == plan), None)

    def _waiting(self, build_id: str) -> None:
        if self.build(build_id)["status"] != WAITING:
            raise Refusal("e2b_build_started", f"build {build_id} was started already")

    def start_build(self, ctx: Context, build_id: str, plan: str, cid: int) -> None:
        self._waiting(build_id)
        self.record(E2bTemplate.BuildStarted, ctx, template_id=self.template_id, build_id=build_id, plan=plan, cid=cid)

    def cached(self, ctx: Context, build_id: str, plan: str, from_build: str) -> list[int]:
        self._waiting(build_id)
        self.record(E2bTemplate.BuildCached, ctx, template_id=self.template_id, build_id=build_id, plan=plan,
                    from_build=from_build)
        return self._clean(ctx, build_id)

    def logged(self, ctx: Context, build_id: str, entries: list) -> None:
        self.build(build_id)
        for i in range(0, len(entries), LOG_ENTRIES_PER_EVENT_MAX):
            self.record(E2bTemplate.BuildLogged, ctx, template_id=self.template_id, build_id=build_id,
                        entries=cut_entries(entries[i:i + LOG_ENTRIES_PER_EVENT_MAX]))

    def built(self, ctx: Context, build_id: str, checkpoint: str, workdir: str | None) -> list[int]:
        """The build is ready: its tags move to it; the CIDs of the VMs no build holds now."""
        if self.build(build_id)["status"] != BUILDING:
            raise Refusal("e2b_build_started", f"build {build_id} is not building")
        self.record(E2bTemplate.BuildReady, ctx, template_id=self.template_id, build_id=build_id,
                    checkpoint=checkpoint, workdir=workdir)
        return self._clean(ctx, build_id)

    def failed(self, ctx: Context, build_id: str, message: str, step: str | None) -> list[int]:
        b = self.build(build_id)
        if b["status"] not in (WAITING, BUILDING):
            return []
        self.record(E2bTemplate.BuildFailed, ctx, template_id=self.template_id, build_id=build_id,
                    message=message[:LOG_MESSAGE_CHARS_MAX], step=step)
        return [b["cid"]] if b["cid"] is not None and not self._held(b["cid"], build_id) else []

    def _held(self, cid: int, but: str) -> bool:
        return any(x["cid"] == cid for bid, x in self.builds.items() if bid != but)

    def _clean(self, ctx: Context, newest: str) -> list[int]:
        """An older ready build with no tags left goes, with its VM unless another build holds it."""
        tagged = set(self.tags.values())
        drop = []
        for bid in [b for b in self.ready() if b not in tagged and b != newest]:
            cid = self.builds[bid]["cid"]
            self.record(E2bTemplate.BuildRemoved, ctx, template_id=self.template_id, build_id=bid)
            if cid is not None and not self._held(cid, bid):
                drop.append(cid)
        return drop

    def delete(self, ctx: Context) -> list[int]:
        """Deleted: the CIDs of its builds' VMs, to remove."""
        self._live()
        cids = sorted({b["cid"] for b in self.builds.values() if b["cid"] is not None})
        self.record(E2bTemplate.Deleted, ctx, template_id=self.template_id)
        return cids
