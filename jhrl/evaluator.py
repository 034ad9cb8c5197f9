"""Decide a call against a LawSet, and decide which tools an agent is offered at all.

The rules, in the order they apply:
1. A preventive forbid that matches refuses the call, and the refusal is a violation.
   Detective and judgment forbids do not stop the call; they are recorded, and are violations too.
2. A read tool (risk read) passes at every permission level. An `ask` law that matches still
   holds it for the owner, unless the owner approved this exact call.
3. Any other call needs a permit (default deny). A missing permit is not misconduct.
4. With a permit: read-only mode refuses it; ask mode, or a matching `ask` law, holds it for the
   owner's approvals unless the owner approved this exact call; otherwise it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .call import ASK_LAW, ASK_MODE, DEFAULT_DENY, FORBIDDEN, PERMITTED, READ, READ_ONLY_MODE, Call, Decision
from .compiler import LawSet


def decide(lawset: LawSet, call: Call) -> Decision:
    matched: list[str] = []
    permits: list[str] = []
    asks: list[str] = []
    recorded: list[str] = []
    forbidding = None
    for cl in lawset.candidates(call.action):
        if not cl.test(call):
            continue
        law = cl.law
        matched.append(law.id)
        if law.effect == "forbid":
            if law.enforcement != "preventive":
                recorded.append(law.id)
            elif forbidding is None:
                forbidding = law.id
        elif law.effect == "permit":
            permits.append(law.id)
        else:
            asks.append(law.id)
    effect, reason = _outcome(call, forbidding, permits, asks)
    return Decision(
        effect=effect, reason=reason, matched=tuple(matched), forbidding=forbidding,
        violation=forbidding is not None or bool(recorded), recorded=tuple(recorded),
        permits=tuple(permits), asks=tuple(asks),
    )


def _outcome(call: Call, forbidding, permits, asks) -> tuple[str, str]:
    if forbidding is not None:
        return "deny", FORBIDDEN
    held = asks and not call.approved
    if call.risk == "read":
        return ("ask", ASK_LAW) if held else ("allow", PERMITTED if permits else READ)
    if not permits:
        return "deny", DEFAULT_DENY
    if call.mode == "read-only":
        return "deny", READ_ONLY_MODE
    if held:
        return "ask", ASK_LAW
    if call.mode == "ask" and not call.approved:
        return "ask", ASK_MODE
    return "allow", PERMITTED


def could_run(lawset: LawSet, role: str, tier: str, mode: str, action: str, risk: str) -> bool:
    """Whether some call of this tool, by this agent, could be allowed or held for approval.

    Arguments are unknown here: a law that depends on them might or might not match. A preventive
    forbid hides the tool only when it matches whatever the arguments; a permit offers it when it
    could match. No call is approved in advance, so C-004a hides irreversible tools.
    """
    probe = Call(role=role, tier=tier, mode=mode, action=action, risk=risk)
    could_permit = risk == "read"
    for cl in lawset.candidates(action):
        verdict = cl.maybe(probe)
        if cl.effect == "forbid" and cl.preventive and verdict is True:
            return False
        if cl.effect == "permit" and verdict is not False:
            could_permit = True
    if risk != "read" and mode == "read-only":
        return False
    return could_permit


def offered_tools(lawset: LawSet, role: str, tier: str, mode: str,
                  tools: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[str]:
    """The tools (name -> risk class) this agent is offered, in the order given.

    A tool its role may never use is not offered at all.
    """
    items = tools.items() if isinstance(tools, Mapping) else tools
    return [name for name, risk in items if could_run(lawset, role, tier, mode, name, risk)]
