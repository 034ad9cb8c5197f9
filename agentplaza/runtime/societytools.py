"""The society's host tools: hiring and paying (``plaza_hire``, ``plaza_pay``), discoveries
(``plaza_toolbox_share``) and memory (``plaza_memory_*``), one function a tool, as in ``runtime.hosttools``:
``fn(session, agent, args) -> result``, run after the args fit the schema and the laws allowed the call,
acting through ``commands`` as the agent (its CID as the actor, the role the hub gave it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..commands import agents as agents_commands
from ..commands import hiring
from ..commands import memory as memory_commands
from ..commands import toolbox as toolbox_commands
from ..domain.base import Refusal
from ..domain.memory import slug
from ..projections import memory as memory_rm
from ..projections import toolbox as toolbox_rm

if TYPE_CHECKING:
    from .session import HarnessSession


def _role_of(s: HarnessSession, cid: Any) -> str | None:
    """An agent's role from the store (the read models may be a moment behind a new agent)."""
    if type(cid) is not int:
        return None
    try:
        found = agents_commands.agent(s.rt.cmds, cid)
    except Refusal:
        return None
    return found.role if found is not None else None


def hire_facts(s: HarnessSession, agent: Any, args: dict) -> dict:
    """What the laws read about a hire, from the plaza's records (never the model's word): the contact's
    role (S-013: "No agent hires the orchestrator") and the bonus (S-014: a large one waits)."""
    return {"contact_role": _role_of(s, args.get("to")) or "", "bonus": args.get("bonus") or 0}


def plaza_hire(s: HarnessSession, agent: Any, args: dict) -> dict:
    """Hire a contact: a task for it, funded from the plaza budget; the bonus paid only if the work passes."""
    out = hiring.hire(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, args["to"], args["title"], args["acceptance"],
                      details=args.get("details") or "", budget=args.get("budget"), bonus=args.get("bonus")).value
    s.rt.work_for(args["to"])
    return {"task": out["id"], "contact": args["to"], "bonus": out["hire"]["bonus"], "budget": out["budget"],
            "note": "the task is your contact's now; a bonus is paid from your wallet only if the work passes"}


def plaza_pay(s: HarnessSession, agent: Any, args: dict) -> dict:
    """The payment tool: at or below the owner's approve_over it moves at once, above it waits for the owner."""
    out = hiring.transfer(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, args["to"], args["amount"], args["memo"]).value
    held = out.get("status") == "held"
    return {"status": out.get("status"), "amount": args["amount"], "to": args["to"],
            "payment": (out.get("payment") or {}).get("id"),
            "note": (f"above the approval threshold ({out['approve_over']}): it waits for the owner in Approvals; "
                     "you are told when it is decided") if held else "paid"}


# -- discoveries ------------------------------------------------------------------------------------------

#: The most discoveries ``plaza_toolbox`` shows (flagged ones last and marked).
MAX_DISCOVERIES_SHOWN = 100


def discoveries(s: HarnessSession) -> list[dict]:
    """What agents found useful, for the toolbox survey: "A discovery is information, not a way to call a
    service." """
    return toolbox_rm.discovery_rows(s.rt.hub.read_models, MAX_DISCOVERIES_SHOWN)


def plaza_toolbox_share(s: HarnessSession, agent: Any, args: dict) -> dict:
    """Share a discovery: the same agent and name updates it, another agent's share endorses it."""
    return toolbox_commands.share(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, args["name"], args["how"],
                                  args["verdict"], args["link"]).value


# -- memory -------------------------------------------------------------------------------------------------


def plaza_memory_read(s: HarnessSession, agent: Any, args: dict) -> dict:
    """The agent's own notes (titles, links, the notes that link back), or with ``note`` one note's text."""
    note = slug(args["note"]) if args.get("note") else None
    return memory_rm.memory_of(s.rt.hub.read_models, s.cid, note)


def plaza_memory_write(s: HarnessSession, agent: Any, args: dict) -> dict:
    return memory_commands.write(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, args["note"], args["text"]).value


def plaza_memory_delete(s: HarnessSession, agent: Any, args: dict) -> dict:
    return memory_commands.delete(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, args["note"]).value
