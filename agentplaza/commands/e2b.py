"""The E2B API's use cases (``domain/e2b.py``): each sandbox, snapshot, template and build change in one
unit of work, with the CID it is given and the entry it makes in the sandbox's transcript (under the
sandbox's CID, as an agent's)."""

from __future__ import annotations

from ..domain.agents import Transcript, transcript_id
from ..domain.base import Context, Refusal
from ..domain.e2b import (
    CIDS_ID,
    E2bCids,
    E2bSandbox,
    E2bSnapshot,
    E2bTemplate,
    sandbox_agg_id,
    template_agg_id,
)
from ..domain.plaza import HELD_MESSAGE, held
from .unit import Commands, Done, Unit

#: The transcript entry kind of a sandbox's changes.
ENTRY_KIND = "note"


def allot_in(unit: Unit, ctx: Context, to: str) -> int:
    """A new CID for a sandbox or build VM, for another command's unit."""
    cids = unit.get(CIDS_ID) or E2bCids.open(ctx)
    cid = cids.allot(ctx, to)
    unit.add(cids)
    return cid


def _sandbox(unit: Unit, sandbox_id: str) -> E2bSandbox:
    sb = unit.get(sandbox_agg_id(sandbox_id))
    if sb is None:
        raise Refusal("e2b_sandbox_not_found", f"sandbox {sandbox_id} not found")
    return sb


def _note(unit: Unit, ctx: Context, sb: E2bSandbox, text: str) -> None:
    """The sandbox's transcript entry, under its CID."""
    tr = unit.get(transcript_id(sb.id)) or Transcript.open(ctx, sb.id, sb.cid)
    tr.add(ctx, ENTRY_KIND, text=f"sandbox {sb.sandbox_id}: {text}", detail={"e2b": True})
    unit.add(sb, tr)


def create(cmds: Commands, ctx: Context, *, sandbox_id: str, template_id: str, alias: str, client_id: str,
           metadata: dict, timeout_s: int, auto_pause: bool, network: dict, source: str,
           auto_pause_memory: bool = True) -> Done[int]:
    """A sandbox is asked for (state starting) and given its CID; refused while the plaza is held."""

    def decide(unit: Unit) -> int:
        if held(unit.get):
            raise Refusal("plaza_held", f"{HELD_MESSAGE}: no sandbox is created, woken or connected to")
        cid = allot_in(unit, ctx, f"sandbox:{sandbox_id}")
        sb = E2bSandbox.open(ctx, sandbox_id=sandbox_id, cid=cid, template_id=template_id, alias=alias,
                             client_id=client_id, metadata=metadata, timeout_s=timeout_s, auto_pause=auto_pause,
                             network=network, source=source, auto_pause_memory=auto_pause_memory)
        _note(unit, ctx, sb, f"created from {alias}" + (f" ({source})" if source else ""))
        return cid

    return cmds.run(decide)


def _change(cmds: Commands, ctx: Context, sandbox_id: str, act, text: str) -> Done[None]:
    def decide(unit: Unit) -> None:
        sb = _sandbox(unit, sandbox_id)
        act(sb)
        _note(unit, ctx, sb, text)

    return cmds.run(decide)


def started(cmds: Commands, ctx: Context, sandbox_id: str, boot_s: float) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.started(ctx, boot_s), f"running (booted in {boot_s:.2f} s)")


def paused(cmds: Commands, ctx: Context, sandbox_id: str, memory: bool = True) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.pause(ctx, memory),
                   "paused" + ("" if memory else " (disk only: a resume boots it cold)"))


def resumed(cmds: Commands, ctx: Context, sandbox_id: str, timeout_s: int | None,
            auto_pause: bool | None = None) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.resume(ctx, timeout_s, auto_pause), "resumed")


def set_timeout(cmds: Commands, ctx: Context, sandbox_id: str, seconds: int) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.set_timeout(ctx, seconds), f"timeout {seconds} s")


def extend(cmds: Commands, ctx: Context, sandbox_id: str, seconds: int) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.extend(ctx, seconds), f"connected (timeout {seconds} s)")


def set_network(cmds: Commands, ctx: Context, sandbox_id: str, network: dict) -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.set_network(ctx, network),
                   f"network allowOut {network.get('allowOut') or []} denyOut {network.get('denyOut') or []}")


def ended(cmds: Commands, ctx: Context, sandbox_id: str, reason: str, message: str = "") -> Done[None]:
    return _change(cmds, ctx, sandbox_id, lambda sb: sb.end(ctx, reason, message),
                   f"ended ({reason}{': ' + message if message else ''})")


def snapshot(cmds: Commands, ctx: Context, *, snapshot_id: str, name: str | None, sandbox_id: str, checkpoint: str,
             memory: bool) -> Done[None]:
    def decide(unit: Unit) -> None:
        sb = _sandbox(unit, sandbox_id)
        snap = E2bSnapshot.take(ctx, snapshot_id=snapshot_id, name=name, sandbox_id=sandbox_id, cid=sb.cid,
                                checkpoint=checkpoint, template_id=sb.template_id, memory=memory)
        unit.add(snap)
        _note(unit, ctx, sb, f"snapshot {snapshot_id}" + (f" ({name})" if name else "")
              + ("" if memory else ", disk only"))

    return cmds.run(decide)


# -- templates and builds ----------------------------------------------------------------------------
def _template(unit: Unit, name: str) -> E2bTemplate:
    t = unit.get(template_agg_id(name))
    if t is None or t.deleted:
        raise Refusal("e2b_template_not_found", f"template '{name}' not found")
    return t


def request_build(cmds: Commands, ctx: Context, name: str, new_template_id: str, build_id: str,
                  tags: list) -> Done[str]:
    """A build asked for (waiting), on the template of that name (made, or made again, here); its id."""

    def decide(unit: Unit) -> str:
        t = unit.get(template_agg_id(name))
        if t is None:
            t = E2bTemplate.open(ctx, new_template_id, name)
        t.renew(ctx, new_template_id)
        t.request(ctx, build_id, tags)
        unit.add(t)
        return t.template_id

    return cmds.run(decide)


def start_build(cmds: Commands, ctx: Context, name: str, build_id: str, plan: str, force: bool,
                cached_log: list) -> Done[tuple[int | None, list]]:
    """A build starts: cached (a ready build of the same plan; unless ``force``), with ``cached_log`` in its
    log, or given a CID of its own. Gives (its CID or None when cached, the CIDs of the VMs no build holds
    now)."""

    def decide(unit: Unit) -> tuple[int | None, list]:
        t = _template(unit, name)
        t.build(build_id)
        same = None if force else t.same_plan(plan)
        unit.add(t)
        if same is not None:
            drop = t.cached(ctx, build_id, plan, same)
            t.logged(ctx, build_id, cached_log)
            return None, drop
        cid = allot_in(unit, ctx, f"build:{build_id}")
        t.start_build(ctx, build_id, plan, cid)
        return cid, []

    return cmds.run(decide)


def _on_template(cmds: Commands, name: str, act) -> Done:
    def decide(unit: Unit):
        t = _template(unit, name)
        out = act(t)
        unit.add(t)
        return out

    return cmds.run(decide)


def build_logged(cmds: Commands, ctx: Context, name: str, build_id: str, entries: list) -> Done[None]:
    return _on_template(cmds, name, lambda t: t.logged(ctx, build_id, entries))


def build_ready(cmds: Commands, ctx: Context, name: str, build_id: str, checkpoint: str,
                workdir: str | None) -> Done[list]:
    return _on_template(cmds, name, lambda t: t.built(ctx, build_id, checkpoint, workdir))


def build_failed(cmds: Commands, ctx: Context, name: str, build_id: str, message: str,
                 step: str | None) -> Done[list]:
    return _on_template(cmds, name, lambda t: t.failed(ctx, build_id, message, step))


def files_uploaded(cmds: Commands, ctx: Context, name: str, files_hash: str, size: int, sha256: str) -> Done[None]:
    """A COPY step's archive came to the template (its bytes are in the data folder; this, in the log)."""
    return _on_template(cmds, name, lambda t: t.files_uploaded(ctx, files_hash, size, sha256))


def delete_template(cmds: Commands, ctx: Context, name: str) -> Done[list]:
    return _on_template(cmds, name, lambda t: t.delete(ctx))
