"""What the simulated owner and agents do: one action per step, drawn from the seed.

A step is a name and four numbers (``Step``), drawn before the run (``plan``); the action reads its
numbers against the plaza as it is when the step runs (``pick``: the n-th task, agent, approval
... round the list).  So a step means something whatever ran before it, and a history with steps
left out still runs: that is what lets a failure shrink.

An action calls the real commands; a refusal is an answer like any other (the runner checks that
it wrote nothing).  ``Memory`` is what the people outside the hub remember across a crash: the
agents they spawned, the tasks and approvals they were told of, the secret values they gave the
vault, the approved calls that ran.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import jhrl
from jhrl.catalog import tier_of

from ..adapters.providers import mock
from ..adapters.providers.presets import ANTHROPIC
from ..adapters.providers.wire import Meter
from ..commands import agents as agent_commands
from ..commands import (
    approvals,
    board,
    conduct,
    conversations,
    council,
    hiring,
    models,
    payments,
    projects,
    scheduler,
    society,
)
from ..commands import laws as law_commands
from ..commands import plaza as plaza_commands
from ..commands import tasks as tk
from ..commands import treasury as tc
from ..domain.approvals import approval_id
from ..domain.base import Refusal
from ..domain.council import SEATS, motion_id
from ..domain.plaza import held as plaza_held
from ..projections import work
from . import blobs, gitwork, guests
from .gitwork import create_repo, git_push, merge_pr, open_pr, project_repos_step, review_pr
from .invariants import Broken
from .memory import Memory, Step, as_agent, holder, of_role, owner, pick, role_of, task_in
from .world import SIM_PASSPHRASE, World

#: The roles of the simulated agents, in the order they are spawned (round the list): workers,
#: a reviewer, the four council seats, the orchestrator who opens projects.
ROLES = ("builder", "reviewer", "finance", "counsel", "incident", "mayor", "orchestrator", "builder", "reviewer")
#: Credits the owner mints at the start, so the first tasks can be funded.
START_MINT = 50_000
#: What the mock provider charges per million tokens (input, output), in credits.
SIM_PRICE = (3_000, 15_000)
#: A law the owner adds and takes away: builders may not use git.
NO_GIT = 'law no-git "No git for builders" {\n  statement "Builders leave git alone."\n  forbid plaza_git\n' \
         '  when role == builder\n}\n'
#: A tool call an agent makes (a write, so an agent in ask mode asks first).
TOOLS = (("vm.write_file", "write"), ("vm.read_file", "read"), ("plaza_git", "write"))


# -- the actions ----------------------------------------------------------------------------------
# Each takes the world, the memory and the step's four numbers; it returns what it did, in words.

def mint(w: World, m: Memory, a: tuple) -> str:
    amount = (0, 100, 2_000, 20_000)[a[0] % 4]
    tc.mint(w.cmds, owner(w), amount, "simulated mint")
    return f"minted {amount}"


def create_task(w: World, m: Memory, a: tuple) -> str:
    budget = (None, 300, 2_000, 60_000)[a[0] % 4]
    role = ("builder", None)[a[1] % 2]
    out = tk.create(w.cmds, owner(w), f"task {len(m.tasks) + 1}", "it works", budget, role=role).value
    m.tasks.append(out["id"])
    return f"created {out['id']} with {budget}"


def withdraw_task(w: World, m: Memory, a: tuple) -> str:
    n = task_in(w, m, a[0], "open", "claimed")
    tk.withdraw(w.cmds, owner(w), n)
    return f"withdrew {n}"


def claim(w: World, m: Memory, a: tuple) -> str:
    n, cid = task_in(w, m, a[0], "open"), of_role(m, "builder", a[1])
    tk.claim(w.cmds, as_agent(w, cid), n, str(cid), "builder")
    return f"{cid} claimed {n}"


def bid(w: World, m: Memory, a: tuple) -> str:
    n, cid = task_in(w, m, a[0], "open"), of_role(m, "builder", a[1])
    price = (1, 100, 500, 2_001)[a[2] % 4]
    tk.bid(w.cmds, as_agent(w, cid), n, str(cid), "builder", price)
    return f"{cid} bid {price} on {n}"


def award(w: World, m: Memory, a: tuple) -> str:
    n, cid = task_in(w, m, a[0], "open"), of_role(m, "builder", a[1])
    tk.award(w.cmds, owner(w), n, str(cid))
    return f"awarded {n} to {cid}"


def model_call(w: World, m: Memory, a: tuple) -> str:
    """An agent's model call through the gateway: checked (refused while held), answered by the mock
    provider (or failing, malformed, never answering, as a fault says), metered, charged once."""
    cid = pick([c for c, _ in m.agents], a[0])
    n = task_in(w, m, a[1], "claimed") if a[2] % 3 else None
    cid = holder(w, n, "worker", cid, a[3]) if n is not None else cid
    tc.check_gateway_call(w.cmds, str(cid), n)
    fault, m.model_fault = m.model_fault, None
    words = " ".join(["word"] * (1 + a[3] % 40))
    directive = "[mock:fail 503 overloaded]" if fault == "fail" else ""
    answer = mock.answer(ANTHROPIC, {"messages": [{"role": "user", "content": f"{directive} {words}"}],
                                     "max_tokens": 64}, "echo", False)
    ended = "timeout" if fault == "timeout" else "failed" if answer.status != 200 else "answered"
    body: Any = answer.body
    if fault == "malformed":
        body, ended = {"usage": {"input_tokens": "many", "output_tokens": -3}, "content": None}, "malformed"
    m.model_calls[ended] = m.model_calls.get(ended, 0) + 1
    if ended in ("timeout", "failed"):
        return f"{cid}'s model call {ended}; nothing charged"
    meter = Meter(ANTHROPIC)
    tokens = meter.body(body)
    tc.charge_gateway(w.cmds, as_agent(w, cid), str(cid), n, input_tokens=tokens.input,
                      output_tokens=tokens.output, price=SIM_PRICE)
    return f"{cid}'s model call on {n} {ended}: {tokens.input}+{tokens.output} tokens"


def report(w: World, m: Memory, a: tuple) -> str:
    n = task_in(w, m, a[0], "claimed", phase="working")
    cid = holder(w, n, "worker", of_role(m, "builder", a[1]), a[2])
    tk.report_done(w.cmds, as_agent(w, cid), n, str(cid), "did it", ["a.py"], "ran the tests")
    return f"{cid} reported {n}"


def take_review(w: World, m: Memory, a: tuple) -> str:
    n, cid = task_in(w, m, a[0], "claimed", phase="review"), of_role(m, "reviewer", a[1])
    tk.take_review(w.cmds, as_agent(w, cid), n, str(cid), "reviewer")
    return f"{cid} took the review of {n}"


def review(w: World, m: Memory, a: tuple) -> str:
    n = task_in(w, m, a[0], "claimed", phase="reviewing")
    cid = holder(w, n, "reviewer", of_role(m, "reviewer", a[1]), a[3])
    passed = a[2] % 3 != 0
    tk.review(w.cmds, as_agent(w, cid), n, str(cid), passed, "notes")
    return f"{cid} {'passed' if passed else 'failed'} {n}"


def give_up(w: World, m: Memory, a: tuple) -> str:
    n = task_in(w, m, a[0], "claimed")
    cid = holder(w, n, "worker", of_role(m, "builder", a[1]), a[2])
    tk.give_up(w.cmds, as_agent(w, cid), n, str(cid), "stuck")
    return f"{cid} gave up {n}"


def pay(w: World, m: Memory, a: tuple) -> str:
    cids = [c for c, _ in m.agents]
    payer, payee = pick(cids, a[0]), pick(cids, a[1])
    amount = (1, 50, 499, 600)[a[2] % 4]
    out = payments.pay(w.cmds, as_agent(w, payer), str(payer), str(payee), amount, "for the help").value
    if out.payment is not None and out.payment["status"] == "pending":
        m.payments.append(out.payment["id"])
    return f"{payer} paid {payee} {amount}: {out.detail.get('status')}"


def decide_payment(w: World, m: Memory, a: tuple) -> str:
    pid = pick(m.payments, a[0])
    if a[1] % 2:
        payments.approve_payment(w.cmds, owner(w), pid or "0" * 32)
        return f"approved payment {pid}"
    payments.deny_payment(w.cmds, owner(w), pid or "0" * 32)
    return f"denied payment {pid}"


def stop_or_resume(w: World, m: Memory, a: tuple) -> str:
    if a[0] % 3 == 0:
        plaza_commands.stop_all(w.cmds, owner(w, "a look at the books"))
        return "STOP ALL"
    plaza_commands.resume(w.cmds, owner(w))
    return "resumed"


def change_law(w: World, m: Memory, a: tuple) -> str:
    op = ("add", "disable", "enable", "delete")[a[0] % 4]
    if op == "add":
        law_commands.change(w.cmds, owner(w), "add", title="no git", source=NO_GIT)
    else:
        law_commands.change(w.cmds, owner(w), op, rule_id=f"R{1 + a[1] % 3}")
    return f"law change: {op}"


def set_mode(w: World, m: Memory, a: tuple) -> str:
    cid = pick([c for c, _ in m.agents], a[0])
    mode = ("ask", "autonomous", "ask", "read-only")[a[1] % 4]
    conduct.set_mode(w.cmds, owner(w), str(cid), mode)
    m.modes[cid] = mode
    return f"{cid} in {mode} mode"


def tool_call(w: World, m: Memory, a: tuple) -> str:
    """An agent's tool call, checked before it runs; a call its approval let through runs (once)."""
    asking = [c for c, mode in sorted(m.modes.items()) if mode == "ask"]
    cid = pick(asking, a[0]) if asking and a[3] % 3 else pick([c for c, _ in m.agents], a[0])
    role = role_of(m, cid)
    suspended = suspended_tools(w, m)
    if suspended and a[3] % 4 in (1, 2):  # an agent tries the tool a sanction suspended
        scid, tool = pick(suspended, a[0])
        agent, call = str(scid), jhrl.Call(role=role_of(m, scid), action=tool, risk="write",
                                           tier=tier_of(role_of(m, scid)), mode="autonomous", args={"path": "s.txt"})
    elif a[1] % 2 and m.waiting_calls:  # the call that waited, tried again with its exact input
        number = pick(sorted(m.waiting_calls), a[2])
        agent, call = m.waiting_calls[number]
    else:
        tool, risk = pick(TOOLS, a[2])
        agent, call = str(cid), jhrl.Call(role=role, action=tool, risk=risk, tier=tier_of(role), mode="autonomous",
                                          args={"path": f"f{a[3] % 3}.txt"})
    under = (int(agent), call.action) in suspended
    try:
        out = conduct.check_call(w.cmds, call, agent, as_agent(w, int(agent)))
    except Refusal as r:
        if under and r.code == "tool_suspended":
            m.suspended_calls["refused"] = m.suspended_calls.get("refused", 0) + 1
        raise
    if under:
        m.suspended_calls["ran"] = m.suspended_calls.get("ran", 0) + 1
    _sanction_approvals(m, out.sanction)
    if out.approval is not None:
        m.waiting_calls[out.approval] = (agent, call)
        if out.approval not in m.approvals:
            m.approvals.append(out.approval)
        return f"{agent}'s {call.action} waits for {out.approval}"
    if out.decision.refused:
        return f"{agent}'s {call.action} refused: {out.decision.reason}"
    if out.approved is not None:
        m.call_runs[out.approved] = m.call_runs.get(out.approved, 0) + 1
        m.waiting_calls.pop(out.approved, None)
    return f"{agent}'s {call.action} ran" + (f" (approved by {out.approved})" if out.approved else "")


def suspended_tools(w: World, m: Memory) -> list[tuple[int, str]]:
    """(agent, tool) for every suspension in force now, as the agents' conduct holds it."""
    found = []
    for cid, _ in m.agents:
        c = conduct.load(w.cmds, str(cid))
        for s in c.in_force(w.clock()) if c is not None else ():
            found.append((cid, s["tool"]))
    return sorted(set(found))


def _sanction_approvals(m: Memory, sanction: dict | None) -> None:
    """The owner is told of a sanction's approvals (a lockout's, a demotion's ...): the queue shows them."""
    for step in (sanction or {}).get("done", ()):
        if step.get("approval") and step["approval"] not in m.approvals:
            m.approvals.append(step["approval"])


def decide_approval(w: World, m: Memory, a: tuple) -> str:
    waiting = [n for n in m.approvals if (x := w.store.get(approval_id(n))) is not None and x.status == "pending"]
    number = pick(waiting if waiting and a[2] % 3 else m.approvals, a[0])
    approve = a[1] % 3 != 0
    approvals.decide(w.cmds, owner(w), number or "a999", approve)
    return f"{'approved' if approve else 'denied'} {number}"


def rate(w: World, m: Memory, a: tuple) -> str:
    cids = [c for c, _ in m.agents]
    rater, ratee = pick(cids, a[0]), pick(cids, a[1])
    if m.contacts and a[3] % 3:
        rater, ratee = pick(sorted(m.contacts), a[0])
    score = ("bad", "poor", "fair", "good", "great")[a[2] % 5]
    society.rate(w.cmds, as_agent(w, rater), rater, ratee, score)
    return f"{rater} rated {ratee} {score}"


def owner_rates(w: World, m: Memory, a: tuple) -> str:
    cid = pick([c for c, _ in m.agents], a[0])
    society.owner_rates(w.cmds, owner(w), cid, bool(a[1] % 2))
    return f"the owner rated {cid}"


def post(w: World, m: Memory, a: tuple) -> str:
    cids = [c for c, _ in m.agents]
    by, to = pick(cids, a[0]), pick(cids, a[1])
    board.post(w.cmds, as_agent(w, by), f"hello @{to}, news number {a[2] % 100}")
    return f"{by} posted"


def message(w: World, m: Memory, a: tuple) -> str:
    cids = [c for c, _ in m.agents]
    by, to = pick(cids, a[0]), pick(cids, a[1])
    conversations.send(w.cmds, as_agent(w, by), to, f"a word, {a[2] % 100}")
    m.contacts |= {(by, to), (to, by)}
    return f"{by} wrote to {to}"


def hire(w: World, m: Memory, a: tuple) -> str:
    cids = [c for c, _ in m.agents]
    hirer, contact = pick(cids, a[0]), of_role(m, "builder", a[1])
    builders = sorted((x, y) for x, y in m.contacts if role_of(m, y) == "builder")
    if builders and a[3] % 3:
        hirer, contact = pick(builders, a[0])
    out = hiring.hire(w.cmds, as_agent(w, hirer), hirer, contact, "help me", "it works", budget=500,
                      bonus=(None, 10)[a[2] % 2]).value
    m.tasks.append(out["task"]["id"] if isinstance(out.get("task"), dict) else out.get("id", ""))
    return f"{hirer} hired {contact}"


def propose_motion(w: World, m: Memory, a: tuple) -> str:
    seat = ("finance", "counsel", "incident", "mayor")[a[0] % 4]
    cid = of_role(m, seat, 0)
    kind = ("priority", "budget_move", "other", "new_law")[a[1] % 4]
    builder = of_role(m, "builder", a[2])
    out = council.propose(w.cmds, as_agent(w, cid), kind, f"motion {len(m.motions) + 1}", "because",
                          role=seat, amount=(100, 9_000)[a[3] % 2] if kind == "budget_move" else None,
                          to=str(builder) if kind == "budget_move" else None).value
    m.motions.append(out["id"])
    return f"{seat} proposed {out['id']} ({kind})"


def vote(w: World, m: Memory, a: tuple) -> str:
    open_ = [n for n in m.motions if (x := w.store.get(motion_id(n))) is not None and x.status == "open"]
    number = pick(open_[-1:] if open_ and a[3] % 3 else m.motions, a[0])
    motion = w.store.get(motion_id(number)) if number else None
    missing = [s for s in SEATS if motion is not None and s not in motion.votes]
    seat = pick(missing, a[1]) if missing and a[3] % 3 else pick(SEATS, a[1])  # mostly a seat yet to vote
    choice = ("yes", "no", "abstain", "yes")[a[2] % 4]
    out = council.vote(w.cmds, as_agent(w, of_role(m, seat, 0)), number or "m999", choice, "I weighed it",
                       role=seat).value
    if out.get("approval"):
        m.approvals.append(out["approval"])
    return f"{seat} voted {choice} on {number}: {out['status']}"


def open_project(w: World, m: Memory, a: tuple) -> str:
    cid = of_role(m, "orchestrator", 0)
    out = projects.open_project(w.cmds, as_agent(w, cid), ("code", "other")[a[0] % 2], f"project {a[1] % 50}",
                                "a brief", role="orchestrator").value
    m.projects.append(out["id"])
    return f"opened {out['id']}"


def research(w: World, m: Memory, a: tuple) -> str:
    number = pick(m.projects, a[0])
    projects.research(w.cmds, as_agent(w, of_role(m, "orchestrator", 0)), number or "p999", "findings",
                      "what we found", role="researcher")
    return f"research on {number}"


#: The laws a prosecutor charges, with their severities: a statute, an owner's rule, a hard case.
CHARGES = (("S-006d", "medium"), ("R1", "high"), ("C-002a", "low"), ("S-040", "critical"), ("T-003", "info"))


def court_agent(w: World, m: Memory, role: str) -> int | None:
    """The plaza's agent of a court role (prosecutor and judge are not among the roles a run starts
    with: the first step that needs one has the owner spawn it, and does nothing else)."""
    return of_role(m, role, 0)


def spawn_for_the_courts(w: World, m: Memory, role: str) -> str:
    if plaza_held(w.store.get):  # (the spawn command itself does not refuse while held: see docs/simulate.md)
        return f"the owner waits for the resume to spawn a {role}"
    (cid,) = agent_commands.spawn(w.cmds, owner(w), role).value
    m.agents.append((cid, role))
    return f"the owner spawned {cid}, a {role}"


def open_incident(w: World, m: Memory, a: tuple) -> str:
    cid = of_role(m, "incident", 0)
    about = pick([c for c, _ in m.agents], a[0]) if a[1] % 3 else None
    out = council.open_incident(w.cmds, as_agent(w, cid), f"incident {a[2] % 50}", "what happened",
                                str(about) if about is not None else None, role="incident").value
    m.incidents.append(out["id"])
    return f"{cid} opened {out['id']} about {about}"


def file_case(w: World, m: Memory, a: tuple) -> str:
    cid = court_agent(w, m, "prosecutor")
    if cid is None:
        return spawn_for_the_courts(w, m, "prosecutor")
    accused = of_role(m, "builder", a[0]) if a[1] % 4 else cid  # now and then against itself: refused
    law, severity = pick(CHARGES, a[2])
    incident = pick(m.incidents, a[3]) if m.incidents and a[3] % 2 else None
    out = council.file_case(w.cmds, as_agent(w, cid), str(accused), law, severity, "the charge", incident,
                            role="prosecutor").value
    m.cases.append(out["id"])
    return f"{cid} filed {out['id']} against {accused} ({law}, {severity})"


def _case(w: World, m: Memory, n: int, draw: int) -> str:
    """Mostly (two draws in three) a case not ruled yet, else any case (a ruled one is refused)."""
    open_ = [x for x in m.cases if council.case_of(w.cmds, x)["ruling"] is None]
    return (pick(open_, n) if open_ and draw % 3 else pick(m.cases, n)) or "c999"


def defend_case(w: World, m: Memory, a: tuple) -> str:
    number, cid = _case(w, m, a[0], a[1]), of_role(m, "counsel", 0)
    council.defend(w.cmds, as_agent(w, cid), number, f"the defence, {a[2] % 10}", role="counsel")
    return f"{cid} defended {number}"


def rule_case(w: World, m: Memory, a: tuple) -> str:
    """The judge rules; a violation carries the schedule's sanctions out (a fine through the journal,
    a probation or lockout of the tool, an approval for the owner) in the same commit."""
    number = _case(w, m, a[0], a[1])
    judge = a[3] % 5 != 0  # else the prosecutor, a party, tries to rule: refused
    cid = court_agent(w, m, "judge" if judge else "prosecutor")
    if cid is None:
        return spawn_for_the_courts(w, m, "judge" if judge else "prosecutor")
    verdict = ("violation", "dismissed", "violation")[a[2] % 3]
    out = council.rule(w.cmds, as_agent(w, cid), number, verdict, "the ruling",
                       role="judge" if judge else "prosecutor").value
    _sanction_approvals(m, out.get("sanction"))
    steps = (out.get("sanction") or {}).get("steps", [])
    return f"{cid} ruled {number} {verdict}" + (f": {', '.join(steps)}" if steps else "")


def _project(w: World, m: Memory, n: int, draw: int) -> str:
    """Mostly (two draws in three) the oldest project still under way (so one gets through its stages),
    else any (an ended one is refused)."""
    live = [x for x in m.projects if (p := projects.load(w.cmds, x)) is not None
            and not p.vetoed and p.stage != "delivered"]
    return (pick(live[:1], n) if live and draw % 3 else pick(m.projects, n)) or "p999"


def advance_project(w: World, m: Memory, a: tuple) -> str:
    """The next step of a project past its research, as its stage calls for (one draw in five another
    step, so the stage's refusals are tried too): a proposal, a critique, the Mayor's approval, a task
    linked, the deliverable handed in and attached; now and then the owner's send-back, veto or flag."""
    number = _project(w, m, a[0], a[1])
    p = projects.load(w.cmds, number) if number != "p999" else None
    stage = p.stage if p is not None else "brief"
    if a[3] % 31 == 0:
        projects.veto(w.cmds, owner(w, "not now"), number)
        return f"the owner vetoed {number}"
    if a[3] % 31 == 1:
        projects.send_back(w.cmds, owner(w, "rethink it"), number)
        return f"the owner sent {number} back"
    if a[3] % 31 == 2:
        projects.flag(w.cmds, owner(w), number, bool(a[2] % 2))
        return f"the owner flagged {number}"
    steps = ("research", "propose", "critique", "approve", "link", "deliver")
    by_stage = {"brief": "research", "research": "propose", "proposal": "critique", "critique": "critique",
                "approval": "approve", "implementation": "link", "review": "deliver"}
    step = pick(steps, a[2]) if a[1] % 5 == 0 else by_stage.get(stage, "deliver")
    if step == "critique" and stage == "critique" and p is not None and p.critique_problem() and a[2] % 2:
        step = "propose"  # a critique asked for a revision: the planner revises
    if step == "link" and p is not None and p.tasks and a[2] % 3:
        return f"{number}'s tasks are worked on"  # (by the tasks' own steps: claim, report, review)
    orchestrator = of_role(m, "orchestrator", 0)
    if step == "research":
        projects.research(w.cmds, as_agent(w, orchestrator), number, "findings", "what we found", role="researcher")
        return f"research on {number}"
    if step == "propose":
        spec = "the change it makes" if a[2] % 4 else None  # a code project without a spec is refused
        projects.propose(w.cmds, as_agent(w, orchestrator), number, "the proposal", "the tasks", spec,
                         role="orchestrator")
        return f"{orchestrator} proposed a plan for {number}"
    if step == "critique":
        cid = pick([c for c, r in m.agents if r in ("builder", "reviewer", "orchestrator")], a[2])
        revise = a[2] % 5 == 0
        projects.critique(w.cmds, as_agent(w, cid), number, "a critique", revise, role=role_of(m, cid))
        return f"{cid} critiqued {number}" + (" (revise)" if revise else "")
    if step == "approve":
        if a[2] % 4 == 0:
            projects.approve(w.cmds, owner(w), number)
            return f"the owner approved {number}"
        cid = of_role(m, "mayor", 0) if a[2] % 4 != 1 else orchestrator  # the orchestrator is refused
        out = projects.approve(w.cmds, as_agent(w, cid), number, role=role_of(m, cid)).value
        if out.get("asked"):
            m.approvals.append(out["asked"])
        return f"{cid} approved {number}" + (f"; asks the owner in {out['asked']}" if out.get("asked") else "")
    if step == "link":
        out = projects.link_task(w.cmds, as_agent(w, orchestrator), number, f"part {a[2] % 9} of {number}",
                                 "it works", (None, 500)[a[2] % 2], task_role="builder", role="orchestrator").value
        task = out.get("task")
        if isinstance(task, dict) and task.get("id"):
            m.tasks.append(task["id"])
        return f"{orchestrator} linked a task to {number}"
    cid = of_role(m, "builder", a[2])
    item = m.deliverables.get(number)
    if item is None and a[2] % 4 and p is not None:  # the deliverable handed in to the Library first (a step)
        item = blobs.library(w).submit(as_agent(w, cid), blobs.content(a[3]), "result.txt", f"deliverable of {number}",
                                       "the result", project=number).value
        m.deliverables[number] = item
        m.items.append(item)
        return f"{cid} handed in {item} for {number}"
    projects.deliver(w.cmds, as_agent(w, cid), number, "the result", "what was built", item, role="builder")
    return f"{cid} delivered {number} ({item})"


def guest_connects(w: World, m: Memory, a: tuple) -> str:
    """An agent's harness connects (its VM booted, or woke) and says hello, asks for work and, handed
    an item, does it; it stays connected, idle, until its channel closes or the hub dies."""
    cid = pick([c for c, _ in m.agents if c not in w.guests], a[0])
    if cid is None:
        return "every agent's guest is connected"
    g = guests.Guest(w.runtime, cid, works=True)
    g.ask({"op": "hello"})
    item = guests.take_and_do(g)
    if g.ended:
        return f"agent {cid}'s guest connected and its session ended"
    w.guests[cid] = g
    return f"agent {cid}'s guest connected" + (f" and did {item}" if item else "; it is idle")


def owner_tells(w: World, m: Memory, a: tuple) -> str:
    """The owner gives an agent work (a sleeping agent is woken by it; its harness does it when time passes)."""
    cid = pick([c for c, _ in m.agents], a[0])
    asleep = agent_commands.agent(w.cmds, cid).status == "asleep"
    agent_commands.tell(w.cmds, owner(w), cid, f"a job, number {a[1] % 100}")
    return f"the owner gave {cid} work" + (" (it was asleep: woken)" if asleep else "")


def set_idle_policy(w: World, m: Memory, a: tuple) -> str:
    """The owner sets how long an idle agent waits before it sleeps (0: never) and who never sleeps."""
    minutes = (0, 5, 10, 60)[a[0] % 4]
    never = (["orchestrator"], [], ["orchestrator", "reviewer"])[a[1] % 3]
    models.set_policy(w.cmds, owner(w), {"idle_sleep_min": minutes, "sleep_never_roles": never})
    return f"idle sleep after {minutes} minutes; never: {', '.join(never) or 'nobody'}"


def submit_item(w: World, m: Memory, a: tuple) -> str:
    """An agent hands a deliverable in to the Library (its bytes in the library's store, then the record)."""
    number = blobs.library(w).submit(as_agent(w, pick([c for c, _ in m.agents], a[0])), blobs.content(a[2]),
                                     "out.txt", f"item {a[1] % 9}", "a deliverable").value
    m.items.append(number)
    return f"submitted {number}"


def share_file(w: World, m: Memory, a: tuple) -> str:
    """An agent shares a file of its workspace (the file store: the same store's folder, then the record)."""
    cid = pick([c for c, _ in m.agents], a[0])
    number = blobs.files(w).share(as_agent(w, cid), cid, f"notes/{a[1] % 9}.txt", blobs.content(a[2])).value
    m.shared.append(number)
    return f"{cid} shared {number}"


def set_secret(w: World, m: Memory, a: tuple) -> str:
    name = ("ALPHA_KEY", "BETA_TOKEN")[a[0] % 2]
    value = f"sk-sim-{a[1]:08x}{a[2]:08x}"
    if name in m.secrets:
        entry = next(e for e in w.vault.entries() if e.name == name)
        w.vault.rotate(owner(w), entry.id, value)
    else:
        w.vault.set(owner(w), name, value, bindings=["provider:anthropic"])
    m.secrets[name] = value
    m.secret_values.add(value)
    return f"{name} set"


def use_secret(w: World, m: Memory, a: tuple) -> str:
    name = ("ALPHA_KEY", "BETA_TOKEN")[a[0] % 2]
    try:
        got = w.vault.reveal(name, consumer="provider:anthropic")
    except Refusal as r:  # the vault records a use it refused (sealed, no such secret): not a silent refusal
        return f"use of {name} refused and recorded: {r.code}"
    if m.secrets.get(name) != got:
        raise AssertionError(f"the vault gave back another value for {name}")
    return f"{name} used"


def unseal(w: World, m: Memory, a: tuple) -> str:
    w.vault.unseal("passphrase", SIM_PASSPHRASE)
    return "vault unsealed"


def time_passes(w: World, m: Memory, a: tuple) -> str:
    """Time passes: the hub's periodic work runs (the vault's watch records the uses whose minute ended;
    the scheduler's pass gives open tasks to idle workers and reported ones to idle reviewers, on the
    read models, none while held; the projects' repositories are kept in git; the runtime's reconcile
    delivers work, sends idle agents looking for people and puts agents idle past ``idle_sleep_min``
    to sleep). Reputation and contacts fade with the clock itself: every read of the society
    (``reputation_in_range`` among them) is at the new time, so a long jump (91 days) fades opinions
    past ``OPINION_FADE_DAYS``. The hub runs its passes every second; here they run at the end of each
    stretch of the time: a minute in, just past the idle limit, and at the end (so an agent idle past
    the limit sleeps before a later pass, outreach's, would give it work)."""
    seconds = (60, 7 * 3600, 24 * 3600, 8 * 24 * 3600, 91 * 24 * 3600)[a[0] % 5]
    idle_min = models.load(w.cmds).policy.get("idle_sleep_min", 0)
    marks = sorted({s for s in (60, (idle_min + 1) * 60) if 0 < s < seconds} | {seconds})
    said, at, slept, woke, assigned, held = f"{seconds}s passed", 0, 0, 0, 0, False
    for mark in marks:
        w.clock.advance(mark - at)
        at = mark
        if mark == seconds:
            flushed = w.vault.flush_uses()  # the hub's vault watch records the uses whose minute has ended
            said += f"; {flushed} use groups recorded" if flushed else ""
        if a[1] % 3:  # the scheduler's pass (the hub runs one every second; here when time passes)
            w.rm.catch_up()
            done = scheduler.run_pass(w.cmds, work.queue(w.rm))
            assigned, held = assigned + len(done.assigned), done.held
            if mark == seconds:
                said += "; the scheduler is held" if held else f"; the scheduler assigned {assigned}"
        try:  # the hub's loops that follow the log: the projects' repositories, the runtime's reconcile
            kept = gitwork.project_repos(w)
        except Refusal as r:
            kept = f"the project repository pass was refused ({r.code})"
        try:
            asleep, put, woken = guests.hub_passes(w)
        except AssertionError as e:
            raise Broken("idle_sleep_by_the_rule", str(e)) from None
        slept, woke = slept + put, woke + woken
    return f"{said}; {kept}; {asleep} asleep ({slept} put to sleep, {woke} woken)"


Action = Callable[[World, Memory, tuple], str]
#: Every action, and how often it is drawn (weights).
ACTIONS: dict[str, tuple[Action, int]] = {
    "mint": (mint, 2), "create_task": (create_task, 6), "withdraw_task": (withdraw_task, 1), "claim": (claim, 6),
    "bid": (bid, 1), "award": (award, 1), "model_call": (model_call, 6), "report": (report, 5),
    "take_review": (take_review, 5), "review": (review, 5), "give_up": (give_up, 1), "pay": (pay, 3),
    "decide_payment": (decide_payment, 2), "stop_or_resume": (stop_or_resume, 2), "change_law": (change_law, 1),
    "set_mode": (set_mode, 2), "tool_call": (tool_call, 5), "decide_approval": (decide_approval, 3),
    "rate": (rate, 2), "owner_rates": (owner_rates, 1), "post": (post, 2), "message": (message, 2),
    "hire": (hire, 1), "propose_motion": (propose_motion, 2), "vote": (vote, 5), "open_project": (open_project, 2),
    "research": (research, 1), "create_repo": (create_repo, 1), "submit_item": (submit_item, 1),
    "set_secret": (set_secret, 2), "use_secret": (use_secret, 2), "unseal": (unseal, 1),
    "time_passes": (time_passes, 3),
    "open_incident": (open_incident, 1), "file_case": (file_case, 2), "defend_case": (defend_case, 1),
    "rule_case": (rule_case, 2), "advance_project": (advance_project, 4),
    "git_push": (git_push, 3), "open_pr": (open_pr, 2), "review_pr": (review_pr, 2), "merge_pr": (merge_pr, 2),
    "project_repos": (project_repos_step, 2), "guest_connects": (guest_connects, 2), "set_idle_policy": (set_idle_policy, 1),
    "owner_tells": (owner_tells, 1), "share_file": (share_file, 1),
}


def setup(w: World, agents: int) -> Memory:
    """The plaza every run starts from: the owner mints, spawns ``agents`` agents (their roles round
    ``ROLES``) and each worker says it is available."""
    m = Memory()
    tc.mint(w.cmds, owner(w), START_MINT, "simulated start")
    for i in range(agents):
        role = ROLES[i % len(ROLES)]
        (cid,) = agent_commands.spawn(w.cmds, owner(w), role).value
        m.agents.append((cid, role))
        tk.worker_available(w.cmds, as_agent(w, cid), str(cid), role)
    return m


def plan(rng: random.Random, steps: int, faults: dict[str, int], actions: Sequence[str] | None = None) -> list[Step]:
    """The steps of a run: actions by their weights, faults by theirs (``faults.FAULTS``); ``actions``
    names the only actions drawn (an area's run, as the tests of one area use; None: every action)."""
    chosen = [n for n in ACTIONS if actions is None or n in actions]
    names = chosen + [f"fault:{f}" for f in faults]
    weights = [ACTIONS[n][1] for n in chosen] + list(faults.values())
    return [Step(rng.choices(names, weights)[0], tuple(rng.getrandbits(31) for _ in range(4)))  # type: ignore[misc]
            for _ in range(steps)]

