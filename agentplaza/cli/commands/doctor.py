"""agentplaza doctor: checks this machine for a plaza and its agents, and says what to fix."""

from __future__ import annotations

from ..actions import Action, Area
from ..env import Env

#: The exit status when a check fails.
FAILED_EXIT = 1


def render(d: dict) -> str:
    width = max(len(c["name"]) for c in d["checks"])
    rows = [f"{c['status']:<4}  {c['name']:<{width}}  {c['found']}" for c in d["checks"]]  # whole: no cell is cut
    fixes = [f"  {c['name']}: {c['fix']}" for c in d["checks"] if c["fix"] and c["status"] != "ok"]
    verdict = "this machine is ready" if d["ok"] and not fixes else (
        "this machine is ready; to do better:" if d["ok"] else "to fix:")
    return "\n".join([*rows, "", verdict, *fixes])


def run(env: Env) -> int:
    from .. import doctor  # loads the microVM checks only for this command

    d = doctor.report(env.target.url)
    return env.show(d, render) or (0 if d["ok"] else FAILED_EXIT)


AREA = Area("doctor", "check this machine for a plaza and its agents, and say what to fix", (
    Action("check", "virtualization, QEMU, the guest image, the folders and their modes, the hub's port",
           run=run, default=True),
))
