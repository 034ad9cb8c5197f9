"""What breaks in a simulated run, drawn from the seed like any step (``fault:NAME``).

Each fault takes the world, the memory and the step's numbers, breaks something where a real plaza
breaks, and says what it did.  ``FAULTS`` names them with how often each is drawn; ``--faults``
picks some (``all``, ``none`` or a comma-separated list).
"""

from __future__ import annotations

from collections.abc import Callable

from ..commands import agents as agent_commands
from ..commands import tasks as tk
from ..commands import treasury as tc
from ..vault.audit import AUDIT_FILE
from ..vault.service import KEY_FILE, VAULT_DOCUMENT
from . import blobs, guests
from .invariants import Broken
from .workload import Memory, pick
from .world import World


class WriteFailed(OSError):
    """The database refused the write (a full disk, a lost connection): nothing was stored."""


def crash(w: World, m: Memory, a: tuple) -> str:
    """The hub dies between two commits; it starts again from the store (see ``World.crash``)."""
    w.crash()
    return "the hub crashed and started again"


def write_fails(w: World, m: Memory, a: tuple) -> str:
    """The next commit of the hub fails inside the database: its transaction is never stored."""
    committer = w.store.committer
    real = committer.submit

    def failing(events):
        committer.submit = real
        raise WriteFailed("simulated: the database failed the write")

    committer.submit = failing
    return "the next write will fail"


def crash_mid_step(w: World, m: Memory, a: tuple) -> str:
    """The hub will die inside the next step, right after its first, second or third commit: a step
    that makes more commits (a guest's session, a channel that drops, a node that goes) is cut in the
    middle.  Whatever the process would do after that commit never happens (``guests.HubDied``)."""
    after = 1 + a[0] % 3
    committer = w.store.committer
    real = committer.submit
    made = 0

    def dying(events):
        nonlocal made
        if w.dying:
            raise guests.HubDied
        positions = real(events)
        made += 1
        if made >= after:
            w.dying = True
            committer.submit = real
            raise guests.HubDied
        return positions

    committer.submit = dying
    return f"the hub will die after the next step's commit number {after}"


#: The events that record a ref git moved (a push, a spec commit; a merge).
GIT_MOVE_TOPICS = ("git:Repo.Pushed", "git:PullRequest.Merged")


def crash_before_git_record(w: World, m: Memory, a: tuple) -> str:
    """The hub will die in its next record of a ref git moved (a push, a merge, a code project's spec
    commit): git holds the move, the record is never stored, nothing of the process undoes it. The next
    start (``World.crash``, as apid's) sets every ref back to the log's (``runtime.gitrepair``), so
    ``refs_move_only_by_recorded_events`` holds after the restart."""
    committer = w.store.committer
    real = committer.submit

    def dying_unrecorded(events):
        if w.dying:
            raise guests.HubDied
        if any(getattr(e, "topic", "").endswith(GIT_MOVE_TOPICS) for e in events):
            w.dying = True
            committer.submit = real
            raise guests.HubDied
        return real(events)

    committer.submit = dying_unrecorded
    return "the hub will die before its next record of a ref git moved"


def second_writer(w: World, m: Memory, a: tuple) -> str:
    """A second hub on the same store moves the budget; this hub's next funding finds its copy stale,
    loses the race and decides again on fresh state."""
    other = w.second_writer()
    tc.mint(other, other.context("owner"), 1 + a[0] % 50, "the other hub's mint")
    after = w.store.max_position()
    try:
        out = tk.create(w.cmds, w.cmds.context("owner"), f"task {len(m.tasks) + 1}", "it works", 300).value
    except WriteFailed:  # an earlier fault's failing write met this hub's funding: still nothing stored
        if w.store.max_position() != after:
            raise Broken("a_refusal_changes_nothing", "a failed write left events in the log") from None
        return "a second writer minted; this hub's funding after the conflict failed to write"
    m.tasks.append(out["id"])
    return f"a second writer minted; {out['id']} was funded after the conflict"


def model_fails(w: World, m: Memory, a: tuple) -> str:
    m.model_fault = ("fail", "timeout")[a[0] % 2]
    return f"the next model call will {'fail' if m.model_fault == 'fail' else 'never answer'}"


def model_malformed(w: World, m: Memory, a: tuple) -> str:
    m.model_fault = "malformed"
    return "the next model answer will be malformed"


def vault_sealed(w: World, m: Memory, a: tuple) -> str:
    w.vault.seal(reason="simulated seal")
    return "the vault was sealed"


def clock_jump(w: World, m: Memory, a: tuple) -> str:
    days = (1, 3, 31)[a[0] % 3]
    w.clock.advance(days * 86_400 + a[1] % 3_600)
    return f"the clock jumped {days} days"


def guest_lost(w: World, m: Memory, a: tuple) -> str:
    """An agent's channel drops (its guest or its node went away) and comes back: the runtime records
    the disconnection, the worker goes offline, then reconnects and is available again."""
    cid, role = pick(m.agents, a[0])
    agent_commands.disconnected(w.cmds, w.cmds.context("node:n0"), cid, "the channel closed")
    tk.worker_offline(w.cmds, w.cmds.context("node:n0"), str(cid))
    agent_commands.connected(w.cmds, w.cmds.context("node:n0"), cid)
    tk.worker_available(w.cmds, w.cmds.context(f"agent:{cid}"), str(cid), role)
    return f"agent {cid}'s channel dropped and came back"


def guest_misbehaves(w: World, m: Memory, a: tuple) -> str:
    """An agent's guest connects, takes its work item and answers garbage, too much or nothing
    (``guests.BEHAVIOURS``), through the hub's real harness session."""
    cid, _role = pick(m.agents, a[0])
    behaviour = guests.BEHAVIOURS[a[1] % len(guests.BEHAVIOURS)]
    return guests.play(w, w.guests, cid, behaviour, a[2])


def silence_ends(w: World, m: Memory, a: tuple) -> str:
    """A silent guest's channel closes (its VM exited): the session reads the end and the item it held
    ends cancelled.  (The runtime has no timeout of its own for a harness that says nothing.)"""
    cid = pick(sorted(w.guests), a[0])
    if cid is None:
        return "no guest is connected"
    w.guests.pop(cid).close()
    return f"agent {cid}'s channel closed"


def node_lost(w: World, m: Memory, a: tuple) -> str:
    """Node n0 and every guest on it go at once, and come back (``guests.node_lost``)."""
    try:
        return guests.node_lost(w, a[0])
    except AssertionError as e:
        raise Broken("the_node_runs_what_the_plaza_says", str(e)) from None


def torn_file(w: World, m: Memory, a: tuple) -> str:
    """The hub dies in the middle of writing a file of its own outside the store: the vault's audit
    log with half a line appended (what a crash inside its append leaves), a half-written temp file
    beside the vault's document or key file (what a crash before the rename leaves), or a Library
    item's or shared file's blob cut short or a half-written one beside it (``_torn_blob``); it starts
    again."""
    which = a[0] % 5
    if which in (3, 4):
        what = _torn_blob(w, m, which, a[1])
    elif which == 0:  # the append it died in is the last thing it wrote (closing, the vault writes its uses)
        def tear() -> None:
            with open(w.folders.state / AUDIT_FILE, "ab") as f:
                f.write(b'{"at":"2026-03-02T09:00:00+00:00","kind":"Vault.Secret')

        w.crash(tear)
        return "the hub crashed writing the vault audit log's last line"
    else:
        target = (w.folders.state / VAULT_DOCUMENT, w.folders.config / KEY_FILE)[which - 1]
        whole = target.read_bytes() if target.exists() else b"{}"
        (target.parent / f".{target.name}.{1 + a[1] % 30000}.tmp").write_bytes(whole[: len(whole) // 2])
        what = f"a temp file beside {target.name}"
    w.crash()
    return f"the hub crashed writing {what}"


def _torn_blob(w: World, m: Memory, which: int, n: int) -> str:
    """A Library item's or a shared file's blob cut to half on disk (3), or a half-written ``.part``
    beside one, as the store's own write leaves it before its rename (4)."""
    found = blobs.blobs(w, m)
    if not found:
        return "no blob (none stored yet)"
    kind, number, key = pick(found, n)
    path = blobs.library(w).store.root / key
    whole = path.read_bytes() if path.exists() else b""
    if which == 3:
        path.write_bytes(whole[: len(whole) // 2])
        m.torn_blobs.add(key)
        return f"{kind} {number}'s blob, cut to {len(whole) // 2} of {len(whole)} bytes"
    path.with_suffix(".part").write_bytes(whole[: len(whole) // 2])
    return f"a half-written .part beside {kind} {number}'s blob"


Fault = Callable[[World, Memory, tuple], str]
#: Every fault and its weight among the steps (the actions' weights sum to about a hundred).
FAULTS: dict[str, tuple[Fault, int]] = {
    "crash": (crash, 3), "write_fails": (write_fails, 2), "second_writer": (second_writer, 2),
    "model_fails": (model_fails, 2), "model_malformed": (model_malformed, 1), "vault_sealed": (vault_sealed, 1),
    "clock_jump": (clock_jump, 1), "guest_lost": (guest_lost, 1), "guest_misbehaves": (guest_misbehaves, 3),
    "silence_ends": (silence_ends, 1), "node_lost": (node_lost, 1),
    "torn_file": (torn_file, 1), "crash_mid_step": (crash_mid_step, 2),
    "crash_before_git_record": (crash_before_git_record, 2),
}


def chosen(spec: str | None) -> dict[str, int]:
    """``--faults``: all (the default), none, or names separated by commas; name -> weight."""
    if spec is None or spec.strip() == "all":
        return {n: w for n, (_, w) in FAULTS.items()}
    if spec.strip() in ("", "none"):
        return {}
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault {', '.join(unknown)}; the faults are {', '.join(FAULTS)}")
    return {n: FAULTS[n][1] for n in names}
