"""What the people outside the hub remember across a crash (``Memory``), a step of a history (``Step``),
and how an action reads its numbers against the plaza as it is (``pick``: the n-th task, agent ...
round the list; ``task_in``, ``holder``, ``of_role``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jhrl

from ..domain.tasks import task_id

if TYPE_CHECKING:
    from .world import World


@dataclass(frozen=True)
class Step:
    """One step of a history: an action (or a fault, ``fault:NAME``) and the numbers it reads."""

    name: str
    args: tuple[int, int, int, int]

    def __str__(self) -> str:
        return f"{self.name}{list(self.args)}"


@dataclass
class Memory:
    agents: list[tuple[int, str]] = field(default_factory=list)  # (cid, role)
    tasks: list[str] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    payments: list[str] = field(default_factory=list)
    motions: list[str] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # name -> every value the owner gave (the last)
    secret_values: set[str] = field(default_factory=set)
    #: approval number -> how many times a call it approved ran
    call_runs: dict[str, int] = field(default_factory=dict)
    #: the calls that waited for an approval: approval number -> (agent, the call)
    waiting_calls: dict[str, tuple[str, jhrl.Call]] = field(default_factory=dict)
    #: the next model call's answer, set by a fault: "fail", "malformed", "timeout" or None
    model_fault: str | None = None
    fail_next_write: bool = False
    #: approvals used by a step the hub died inside, before the call they let through could run
    unrun_uses: int = 0
    model_calls: dict[str, int] = field(default_factory=dict)  # how each model call ended
    modes: dict[int, str] = field(default_factory=dict)  # the mode each agent was last set to
    contacts: set[tuple[int, int]] = field(default_factory=set)  # who has dealt with whom
    logs: list[str] = field(default_factory=list)  # every line the plaza's code logged in the run
    incidents: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)
    deliverables: dict[str, str] = field(default_factory=dict)  # project -> the Library item handed in for it
    #: how each tool call under a suspension in force ended: refused (as it must) or ran
    suspended_calls: dict[str, int] = field(default_factory=dict)
    prs: list[str] = field(default_factory=list)  # the pull requests opened
    items: list[str] = field(default_factory=list)  # the Library items handed in
    shared: list[str] = field(default_factory=list)  # the files agents shared
    torn_blobs: set[str] = field(default_factory=set)  # the store keys whose blob was cut short on disk


def pick(seq: Sequence[Any], n: int) -> Any | None:
    return seq[n % len(seq)] if seq else None


def task_in(w: World, m: Memory, n: int, *states: str, phase: str | None = None) -> str:
    """Mostly (two draws in three) a task in one of ``states``, as an agent that asked the hub would
    pick; else any task the people know of, so the refusals are tried too."""
    if n % 3:
        found = [x for x in m.tasks if (t := w.store.get(task_id(x))) is not None and t.state in states
                 and (phase is None or t.phase == phase)]
        if found:
            return pick(found, n // 3)
    return pick(m.tasks, n) or "t999"


def holder(w: World, n: str, who: str, fallback: int | None, draw: int) -> int | None:
    """The task's worker or reviewer (two draws in three), else ``fallback``: a wrong one is tried too."""
    t = w.store.get(task_id(n))
    held = getattr(t, who, None) if t is not None else None
    return int(held) if held is not None and draw % 3 else fallback


def of_role(m: Memory, role: str, n: int) -> int | None:
    found = [c for c, r in m.agents if r == role]
    return pick(found, n)


def owner(w: World, reason: str | None = None):
    return w.cmds.context("owner", reason)


def as_agent(w: World, cid: int):
    return w.cmds.context(f"agent:{cid}")


def role_of(m: Memory, cid: int) -> str:
    return dict(m.agents)[cid]
