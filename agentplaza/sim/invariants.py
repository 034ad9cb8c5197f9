"""Every invariant of the plaza the simulator checks after every step, each a named function.

Each takes a ``Look`` (the store, the read models and what the people outside remember, read once
per check) and raises ``Broken`` with what it saw.  ``INVARIANTS`` lists them in the order they
run; the property machines in ``tests/properties/`` import the checks they share with it
(``council_outcome``, ``journal_problem``, ``reputation_problem``, ``task_edge_problem``), so a
rule is written once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..domain import council as c
from ..domain import projects as pr
from ..domain import treasury as t
from ..domain.reputation import EVIDENCE_THRESHOLD, UNRATED
from ..domain.tasks import ENDED
from ..events.records import EventRecord

if TYPE_CHECKING:
    from .workload import Memory
    from .world import World


class Broken(AssertionError):
    """An invariant does not hold: ``invariant`` names it, ``message`` says what was seen."""

    def __init__(self, invariant: str, message: str):
        super().__init__(f"{invariant}: {message}")
        self.invariant, self.message = invariant, message


@dataclass
class Look:
    """What the invariants read, read once per check."""

    world: World
    memory: Memory
    _records: list[EventRecord] | None = None
    _live: dict[str, Any] | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def records(self) -> list[EventRecord]:
        if self._records is None:
            self._records = list(self.world.store.read())
        return self._records

    @property
    def live(self) -> dict[str, Any]:
        if self._live is None:
            self._live = self.world.read()
        return self._live

    def accounts(self) -> dict[str, dict]:
        return {a["account"]: a for a in self.live["treasury"]["rm_treasury_accounts"]}


# -- rules shared with the property machines -------------------------------------------------------

def journal_problem(entries: Iterable[dict]) -> str | None:
    """The first journal entry whose postings do not sum to zero, in words (None: all do)."""
    for e in entries:
        if sum(e["postings"].values()) != 0:
            return f"entry {e['id']} ({e['kind']}) sums to {sum(e['postings'].values())}: {e['postings']}"
    return None


def council_outcome(kind: str, amount: int | None, minted: int, votes: Iterable[str]) -> str:
    """The guide's table read directly (not through ``council.OUTCOMES``): who decides the kind, the
    count of the four votes, and what the motion becomes."""
    votes = list(votes)
    yes, no = votes.count("yes"), votes.count("no")
    result = "yes" if yes > no else "no" if no > yes else "tie"
    if kind in ("new_town", "replace_mayor", "new_law"):
        return "waiting"  # the owner decides these, whatever the count
    if kind == "budget_move" and (amount or 0) * 10 > minted:  # more than a tenth of all ever minted
        return "rejected" if result == "no" else "waiting"
    return {"yes": "carried", "no": "rejected", "tie": "waiting"}[result]


def reputation_problem(rows: Iterable[dict]) -> str | None:
    """A reputation is 0-100 with enough evidence, "unrated" below the threshold."""
    for row in rows:
        if row["reputation"] == UNRATED:
            if row["evidence"] >= EVIDENCE_THRESHOLD:
                return f"agent {row['cid']} is unrated with evidence {row['evidence']}"
        elif not (0 <= row["reputation"] <= 100 and row["evidence"] >= EVIDENCE_THRESHOLD):
            return f"agent {row['cid']} has reputation {row['reputation']} on evidence {row['evidence']}"
    return None


#: A task's state after each of its events (an event not named keeps the state it finds).
TASK_STATE_AFTER = {"Task.Created": "open", "Task.Claimed": "claimed", "Task.Passed": "done",
                    "Task.Failed": "failed", "Task.Withdrawn": "withdrawn"}
#: The moves a task's state may make.
TASK_EDGES = frozenset({("open", "claimed"), ("open", "withdrawn"), ("claimed", "done"), ("claimed", "failed"),
                        ("claimed", "withdrawn")})


def task_edge_problem(records: Iterable[EventRecord]) -> str | None:
    """Every task's state moves only along ``TASK_EDGES``, and an ended task has no event after its end."""
    state: dict[str, str] = {}
    for e in records:
        if not e.kind.startswith("Task."):
            continue
        here = state.get(e.originator_id)
        if here in ENDED:
            return f"task event {e.kind} at {e.position} after the task ended {here}"
        there = TASK_STATE_AFTER.get(e.kind, here)
        if here is None:
            if e.kind != "Task.Created":
                return f"{e.kind} at {e.position} before the task was created"
        elif there != here and (here, there) not in TASK_EDGES:
            return f"a task moved {here} -> {there} at {e.position}"
        state[e.originator_id] = there  # type: ignore[assignment]
    return None


# -- the invariants --------------------------------------------------------------------------------

def journal_entries_sum_to_zero(look: Look) -> None:
    problem = journal_problem(look.live["treasury"]["rm_treasury_journal"])
    if problem:
        raise Broken("journal_entries_sum_to_zero", problem)


def no_wallet_or_escrow_below_zero(look: Look) -> None:
    for key, a in look.accounts().items():
        if t.kind_of(key) in ("wallet", "escrow", "budget") and a["balance"] < 0:
            raise Broken("no_wallet_or_escrow_below_zero", f"{key} holds {a['balance']}")
    for key, agg in _aggregates(look).items():
        if agg.balance < 0:
            raise Broken("no_wallet_or_escrow_below_zero", f"the hub's {key} holds {agg.balance}")


def _aggregates(look: Look) -> dict[str, Any]:
    """Every budget, wallet and escrow as the hub holds it (from its cache, as its commands read them)."""
    if "aggregates" not in look.cache:
        store = look.world.store
        look.cache["aggregates"] = {k: store.get(t.account_id(k)) for k in look.accounts()
                                    if t.kind_of(k) in ("wallet", "escrow", "budget")}
    return look.cache["aggregates"]


def credits_conserved(look: Look) -> None:
    """minted = budget + wallets + escrows + treasury + model costs: in the read model's postings,
    and in the balances the hub's own accounts hold."""
    accounts = look.accounts()
    minted = sum(e["amount"] for e in look.live["treasury"]["rm_treasury_journal"] if e["kind"] == t.MINT)
    held = sum(a["balance"] for k, a in accounts.items() if k != t.MINT_SOURCE)
    if -accounts.get(t.MINT_SOURCE, {"balance": 0})["balance"] != minted or held != minted:
        raise Broken("credits_conserved", f"minted {minted}, the accounts hold {held}")
    hub = sum(a.balance for a in _aggregates(look).values())
    nominal = sum(accounts[k]["balance"] for k in (t.TREASURY, t.MODEL_COSTS) if k in accounts)
    if hub + nominal != minted:
        raise Broken("credits_conserved", f"minted {minted}; the hub's budget, wallets and escrows hold {hub} and "
                                          f"the treasury and model costs {nominal}")
    for k, agg in _aggregates(look).items():
        if agg.balance != accounts[k]["balance"]:
            raise Broken("credits_conserved", f"the hub's {k} holds {agg.balance}, its postings sum to "
                                              f"{accounts[k]['balance']}")


def task_states_along_the_edges(look: Look) -> None:
    problem = task_edge_problem(look.records)
    if problem:
        raise Broken("task_states_along_the_edges", problem)


#: What may not happen while the plaza is held: a claim, an agent started, a model call charged.
HELD_FORBIDS = ("Task.Claimed", "Agent.Created")
HELD_FORBIDS_ENTRIES = (t.MODEL_CALL, t.SPEND, t.PAYMENT, t.TRANSFER, t.BONUS)


def nothing_runs_while_held(look: Look) -> None:
    held = False
    for e in look.records:
        if e.kind == "Plaza.Held":
            held = True
        elif e.kind == "Plaza.Resumed":
            held = False
        elif held and (e.kind in HELD_FORBIDS or (e.kind == "Entry.Posted" and e.data.get("kind") in HELD_FORBIDS_ENTRIES)):
            raise Broken("nothing_runs_while_held", f"{e.kind} {e.data.get('kind', '')} at {e.position} while held")


def an_approved_call_runs_once(look: Look) -> None:
    approved: set[str] = set()
    used: dict[str, int] = {}
    for e in look.records:
        if e.kind == "Approval.Approved":
            approved.add(e.originator_id)
        elif e.kind == "Approval.Used":
            if e.originator_id not in approved:
                raise Broken("an_approved_call_runs_once", f"approval {e.originator_id} used at {e.position} "
                                                           "without being approved")
            used[e.originator_id] = used.get(e.originator_id, 0) + 1
    if any(n > 1 for n in used.values()):
        raise Broken("an_approved_call_runs_once", f"an approval was used {max(used.values())} times")
    for number, runs in look.memory.call_runs.items():
        if runs > 1:
            raise Broken("an_approved_call_runs_once", f"the call approved by {number} ran {runs} times")
    if sum(look.memory.call_runs.values()) + look.memory.unrun_uses != sum(used.values()):
        raise Broken("an_approved_call_runs_once", f"{sum(look.memory.call_runs.values())} approved calls ran "
                                                   f"({look.memory.unrun_uses} used as the hub died), the log "
                                                   f"records {sum(used.values())} uses")


def reputation_in_range(look: Look) -> None:
    from ..projections import society

    problem = reputation_problem(society.reputation_rows(look.world.rm, look.world.clock()))
    if problem:
        raise Broken("reputation_in_range", problem)


def council_decides_by_the_table(look: Look) -> None:
    """A motion is counted only once its four seats have voted, as the table says, and no seat votes
    after the count."""
    motions: dict[str, dict] = {}
    for e in look.records:
        if e.kind == "Motion.Created":
            motions[e.originator_id] = {"d": e.data, "votes": {}, "counted": False}
        elif e.kind == "Motion.Voted":
            m = motions[e.originator_id]
            if m["counted"]:
                raise Broken("council_decides_by_the_table", f"a vote at {e.position} after the count")
            m["votes"][e.data["seat"]] = e.data["vote"]
        elif e.kind == "Motion.Counted":
            m = motions[e.originator_id]
            if set(m["votes"]) != set(c.SEATS):
                raise Broken("council_decides_by_the_table", f"motion {m['d']['number']} counted after "
                                                             f"{len(m['votes'])} votes")
            want = council_outcome(m["d"]["kind"], m["d"]["amount"], m["d"]["minted"], m["votes"].values())
            if e.data["status"] != want:
                raise Broken("council_decides_by_the_table", f"motion {m['d']['number']} became "
                                                             f"{e.data['status']}; the table says {want}")
            m["counted"] = True


def no_secret_value_anywhere(look: Look) -> None:
    """No value the owner gave the vault is in any event, any read model or any line logged."""
    values = look.memory.secret_values
    if not values:
        return
    texts = [json.dumps([e.data, e.reason], default=str) for e in look.records]
    texts.append(json.dumps(look.live, default=str))
    texts.append("\n".join(look.memory.logs))
    for v in values:
        for text in texts:
            if v in text:
                raise Broken("no_secret_value_anywhere", f"a secret value ({v[:7]}...) is in the log, a read model "
                                                     "or a logged line")


def read_models_equal_a_fold_from_event_one(look: Look) -> None:
    rm = look.world.rm
    folded = rm.replay(look.world.store.max_position())
    live = look.live
    for name in live:
        if folded[name] != live[name]:
            tables = [tn for tn in live[name] if folded[name].get(tn) != live[name][tn]]
            raise Broken("read_models_equal_a_fold_from_event_one", f"{name} ({', '.join(tables)}) differs from a "
                                                                    "fold from event 1")


def audit_verify_intact(look: Look) -> None:
    v = look.world.store.verify()
    if not v.intact:
        raise Broken("audit_verify_intact", f"the chain breaks at {v.broken_at}: {v.problem}")


def a_work_item_ends_cleanly(look: Look) -> None:
    """A work item runs only while a harness session holds it: an agent whose item is running has a
    connected guest whose session took that very item; every item started ends once (done, failed or
    cancelled) before the agent starts another."""
    running: dict[str, str] = {}
    for e in look.records:
        if e.kind == "Agent.WorkStarted":
            if e.originator_id in running:
                raise Broken("a_work_item_ends_cleanly", f"{e.data['item']} started at {e.position} while "
                                                         f"{running[e.originator_id]} still ran")
            running[e.originator_id] = e.data["item"]
        elif e.kind == "Agent.WorkFinished":
            if running.pop(e.originator_id, None) != e.data["item"]:
                raise Broken("a_work_item_ends_cleanly", f"{e.data['item']} finished at {e.position} without "
                                                         "having started")
        elif e.kind in ("Agent.Stopped", "Agent.Restarted", "Agent.Wiped", "Agent.Retired", "Agent.Deleted"):
            running.pop(e.originator_id, None)
    guests = look.world.guests
    held = {g.session.taken for g in guests.values() if not g.ended}
    for item in running.values():
        if item not in held:
            raise Broken("a_work_item_ends_cleanly", f"work item {item} is running and no harness session holds "
                                                     "it: the agent can take no more work")


def the_vault_audit_log_verifies(look: Look) -> None:
    """The vault's own audit log (a file outside the store, a MAC chain) verifies line by line, and
    it has a line for every vault event the store holds."""
    v = look.world.vault.audit.verify()  # (not ``audit_verify``: it records the uses due first, a write)
    if not v["intact"]:
        raise Broken("the_vault_audit_log_verifies", v["problem"])
    events = sum(1 for e in look.records if e.family == "vault")
    if v["lines"] != events:
        raise Broken("the_vault_audit_log_verifies", f"the audit log has {v['lines']} lines for {events} vault events")


def a_suspended_tool_is_refused(look: Look) -> None:
    """No tool call of an agent is decided (let alone run) while a suspension of that tool is in force
    for it (a probation or lockout a sanction set, not lifted, not over); and every call the workload
    made under one was refused."""
    cids: dict[str, str] = {}
    suspensions: dict[tuple[str, str], dict[str, list]] = {}  # (cid, tool) -> suspension id -> [until, lifted at]
    by_id: dict[tuple[str, str], tuple[str, str]] = {}
    for e in look.records:
        if e.kind == "Conduct.Created":
            cids[e.originator_id] = str(e.data["cid"])
        elif e.kind == "Conduct.Suspended":
            key = (cids[e.originator_id], e.data["tool"])
            suspensions.setdefault(key, {})[e.data["suspension"]] = [_at(e.data["until"]), None]
            by_id[(e.originator_id, e.data["suspension"])] = key
        elif e.kind == "Conduct.Lifted":
            key = by_id[(e.originator_id, e.data["suspension"])]
            suspensions[key][e.data["suspension"]][1] = _at(e.at)
        elif e.kind == "ToolCall.CallDecided":
            at = _at(e.at)
            for sid, (until, lifted) in suspensions.get((str(e.data["agent"]), e.data["tool"]), {}).items():
                if at < until and (lifted is None or at < lifted):
                    raise Broken("a_suspended_tool_is_refused", f"agent {e.data['agent']}'s {e.data['tool']} was "
                                 f"decided at {e.position} under suspension {sid} (until {until.isoformat()})")
    ran = look.memory.suspended_calls.get("ran", 0)
    if ran:
        raise Broken("a_suspended_tool_is_refused", f"{ran} tool calls under a suspension in force were not refused")


def project_edge_problem(records: Iterable[EventRecord]) -> str | None:
    """Every project's stage moves from where it is to the next stage, or back as ``BACK_MOVES`` allows,
    never past a stage; a delivered or vetoed project never moves again."""
    stage: dict[str, str] = {}
    ended: set[str] = set()
    for e in records:
        if e.kind == "Project.Created":
            stage[e.originator_id] = pr.BRIEF
        elif e.kind == "Project.Vetoed":
            ended.add(e.originator_id)
        elif e.kind == "Project.Moved":
            here, there = stage.get(e.originator_id), e.data["stage"]
            if e.originator_id in ended:
                return f"a project moved {e.data['source']} -> {there} at {e.position} after it was vetoed"
            if here != e.data["source"]:
                return f"a project at {here} moved from {e.data['source']} at {e.position}"
            forward = there in pr.STAGES and pr.STAGES.index(there) == pr.STAGES.index(here) + 1
            if not forward and (here, there) not in pr.BACK_MOVES:
                return f"a project moved {here} -> {there} at {e.position}"
            stage[e.originator_id] = there
            if there == pr.DELIVERED:
                ended.add(e.originator_id)
    return None


def project_stages_along_the_edges(look: Look) -> None:
    problem = project_edge_problem(look.records)
    if problem:
        raise Broken("project_stages_along_the_edges", problem)


def refs_move_only_by_recorded_events(look: Look) -> None:
    """Every repository's refs on the git server's disk are where the log's events put them: its first
    commit on the default branch (``Repo.Created``), then each ref a recorded push moved, from the
    commit the log had it at (``Repo.Pushed``), and each merge's target (``PullRequest.Merged``). A ref
    git moved that the log does not know of (a push whose record failed, say) breaks it."""
    from .gitwork import store_of

    expected, prs = git_refs_problem(look.records)
    if isinstance(expected, str):
        raise Broken("refs_move_only_by_recorded_events", expected)
    store = store_of(look.world)
    for name, refs in expected.items():
        disk = store.refs(name)
        if disk != refs:
            moved = sorted(r for r in set(disk) | set(refs) if disk.get(r) != refs.get(r))
            raise Broken("refs_move_only_by_recorded_events", f"{name}'s {', '.join(moved)} on disk "
                         f"{[disk.get(r, 'none')[:12] for r in moved]}, the log has {[refs.get(r, 'none')[:12] for r in moved]}")


def git_refs_problem(records: Iterable[EventRecord]) -> tuple[dict[str, dict[str, str]] | str, dict[str, dict]]:
    """Each repository's refs as the log's events put them (or what breaks the fold, in words), and
    each pull request as the log has it."""
    zero = "0" * 40
    refs: dict[str, dict[str, str]] = {}
    prs: dict[str, dict] = {}
    for e in records:
        if e.kind == "Repo.Created":
            refs[e.data["name"]] = {f"refs/heads/{e.data['default_branch']}": e.data["head"]}
        elif e.kind == "Repo.Pushed":
            held = refs.get(e.data["repo"])
            if held is None:
                return f"a push at {e.position} to {e.data['repo']}, which the log never created", prs
            for mv in e.data["moves"]:
                if held.get(mv["ref"], zero) != mv["old"]:
                    return (f"a push at {e.position} moved {mv['ref']} of {e.data['repo']} from {mv['old'][:12]}; "
                            f"the log had it at {held.get(mv['ref'], zero)[:12]}"), prs
                if mv["new"] == zero:
                    held.pop(mv["ref"], None)
                else:
                    held[mv["ref"]] = mv["new"]
        elif e.kind == "PullRequest.Created":
            prs[e.originator_id] = dict(e.data, state="open")
        elif e.kind == "PullRequest.Merged":
            p = prs[e.originator_id]
            held, ref = refs[p["repo"]], f"refs/heads/{p['target']}"
            if held.get(ref) != e.data["old"]:
                return (f"{p['number']} was merged at {e.position} onto {e.data['old'][:12]}; the log had "
                        f"{p['target']} at {str(held.get(ref))[:12]}"), prs
            held[ref] = e.data["commit"]
            p["merged"] = e.data
    return refs, prs


def a_pull_request_merges_once(look: Look) -> None:
    """A pull request is commented, reviewed, merged or closed only while it is open: it merges at most
    once and never after it was closed; a merged pull request's commit is on its target branch (the
    merge's commit holds it, and the branch still holds the merge)."""
    from .gitwork import store_of

    state: dict[str, str] = {}
    for e in look.records:
        if e.kind == "PullRequest.Created":
            state[e.originator_id] = "open"
        elif e.kind in ("PullRequest.Commented", "PullRequest.Reviewed", "PullRequest.Merged", "PullRequest.Closed"):
            if state.get(e.originator_id) != "open":
                raise Broken("a_pull_request_merges_once", f"{e.kind} of {e.data['number']} at {e.position} after "
                             f"it was {state.get(e.originator_id, 'never opened')}")
            if e.kind == "PullRequest.Merged":
                state[e.originator_id] = "merged"
            elif e.kind == "PullRequest.Closed":
                state[e.originator_id] = "closed"
    _, prs = git_refs_problem(look.records)
    store = store_of(look.world)
    for p in prs.values():
        merged = p.get("merged")
        if merged is None:
            continue
        tip = store.refs(p["repo"]).get(f"refs/heads/{p['target']}")
        for holder in (merged["commit"], tip):
            if holder is None or not _holds(store, p["repo"], holder, merged["head"]):
                raise Broken("a_pull_request_merges_once", f"{p['number']}'s commit {merged['head'][:12]} is not on "
                             f"{p['target']} ({str(holder)[:12]})")


def _holds(store: Any, repo: str, commit: str, head: str) -> bool:
    """Does ``commit`` hold ``head`` (``head`` is it or an ancestor)? Kept: a commit's history never changes."""
    key = (str(store.root), repo, commit, head)
    if key not in _HOLDS:
        _HOLDS[key] = commit == head or store.is_ancestor(repo, head, commit)
    return _HOLDS[key]


_HOLDS: dict[tuple[str, str, str, str], bool] = {}


#: An agent's events that mark it busy or just idle (its read model row's ``changed_at`` moves with
#: each, among others): the idle time the hub's rule counts runs from the last of them at the latest.
AGENT_ACTIVITY = ("Agent.Created", "Agent.Connected", "Agent.Told", "Agent.WorkStarted", "Agent.WorkFinished",
                  "Agent.Woke")


def idle_sleep_by_the_rule(look: Look) -> None:
    """The hub puts an agent to sleep (``Agent.Slept`` by the hub) only by the guide's idle rule: the
    policy's ``idle_sleep_min`` is not 0, the agent's role is not in ``sleep_never_roles``, the plaza is
    not held, the agent has been idle that long (nothing of it since) and nothing keeps it awake (an
    item it is working on, work queued for it, a task or review it holds, an approval of its that
    waits); and work wakes it: no item is told to or started by an agent while it sleeps (a ``Woke``
    comes first, or its harness connects again: its VM booted afresh, after its node came back)."""
    policy: dict = {}
    held = False
    agents: dict[str, dict] = {}
    workers: dict[Any, str] = {}  # a worker's aggregate -> its agent's CID
    tasks: dict[str, str] = {}  # CID -> the task or review its worker holds
    approvals: dict[Any, str] = {}  # a pending approval -> the CID of the agent it is for
    for e in look.records:
        if e.kind in ("ModelSettings.Created", "ModelSettings.PolicySet"):
            policy.update(e.data["policy"])
        elif e.kind == "Plaza.Held":
            held = True
        elif e.kind == "Plaza.Resumed":
            held = False
        elif e.kind == "Agent.Created":
            agents[e.originator_id] = {"cid": e.data["cid"], "role": e.data["role"], "asleep": False, "queue": set(),
                                       "working": None}
        elif e.kind == "Worker.Created":
            workers[e.originator_id] = str(e.data["cid"])
        elif e.kind == "Worker.Took" and e.originator_id in workers:
            tasks[workers[e.originator_id]] = e.data["task"]
        elif e.kind in ("Worker.Released", "Worker.Offline") and e.originator_id in workers:
            tasks.pop(workers[e.originator_id], None)
        elif e.kind == "Approval.Requested" and e.data.get("agent") is not None:
            approvals[e.originator_id] = str(e.data["agent"])
        elif e.kind in ("Approval.Approved", "Approval.Denied"):
            approvals.pop(e.originator_id, None)
        if not e.kind.startswith("Agent.") or e.originator_id not in agents:
            continue
        a = agents[e.originator_id]
        if e.kind in ("Agent.Told", "Agent.WorkStarted") and a["asleep"]:
            raise Broken("idle_sleep_by_the_rule", f"agent {a['cid']} was given work ({e.kind} at {e.position}) "
                         "while it slept: work wakes it first")
        if e.kind == "Agent.Told":
            a["queue"].add(e.data["item"])
        elif e.kind in ("Agent.WorkStarted", "Agent.WorkWithdrawn"):
            a["queue"].discard(e.data["item"])
            a["working"] = e.data["item"] if e.kind == "Agent.WorkStarted" else a["working"]
        elif e.kind == "Agent.WorkFinished":
            a["working"] = None
        elif e.kind == "Agent.Slept":
            if e.actor == "hub":
                why = _kept_awake(a, policy, held, _at(e.at) - a["last"], tasks.get(str(a["cid"])),
                                  str(a["cid"]) in approvals.values())
                if why:
                    raise Broken("idle_sleep_by_the_rule", f"the hub put agent {a['cid']} to sleep at {e.position}: "
                                 f"{why}")
            a["asleep"] = True
        elif e.kind in ("Agent.Woke", "Agent.Connected"):  # (a harness that says hello is awake: a VM booted afresh)
            a["asleep"] = False
        if e.kind in AGENT_ACTIVITY:
            a["last"] = _at(e.at)


def _kept_awake(a: dict, policy: dict, held: bool, idle: dt.timedelta, task: str | None, waits: bool) -> str | None:
    """Why the idle rule keeps agent ``a`` awake now (None: it may sleep)."""
    minutes = policy.get("idle_sleep_min", 0)
    if not minutes:
        return "the policy says never"
    if held:
        return "the plaza is held"
    if a["role"] in (policy.get("sleep_never_roles") or ()):
        return f"its role {a['role']} never sleeps"
    if idle < dt.timedelta(minutes=minutes):
        return f"it was idle {idle} only"
    if a["working"] is not None:
        return f"it was working on {a['working']}"
    if a["queue"]:
        return f"work was queued for it ({', '.join(sorted(a['queue']))})"
    if task is not None:
        return f"it held {task}"
    return "an approval of its waited" if waits else None


def a_torn_blob_is_never_served(look: Look) -> None:
    """Every Library item and shared file, read back as a download reads it: what is served is the
    blob the log's digest names; a blob cut short on disk is refused (``item_corrupt``), never served
    as good; a whole one is never refused as corrupt."""
    from .blobs import problem

    found = problem(look.world, look.memory)
    if found:
        raise Broken("a_torn_blob_is_never_served", found)


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


Invariant = Callable[[Look], None]
#: Every invariant, in the order they are checked.
INVARIANTS: dict[str, Invariant] = {f.__name__: f for f in (
    journal_entries_sum_to_zero, no_wallet_or_escrow_below_zero, credits_conserved, task_states_along_the_edges,
    nothing_runs_while_held, an_approved_call_runs_once, reputation_in_range, council_decides_by_the_table,
    no_secret_value_anywhere, read_models_equal_a_fold_from_event_one, audit_verify_intact,
    a_work_item_ends_cleanly, the_vault_audit_log_verifies, a_suspended_tool_is_refused,
    project_stages_along_the_edges, refs_move_only_by_recorded_events, a_pull_request_merges_once,
    idle_sleep_by_the_rule, a_torn_blob_is_never_served,
)}
#: Checked by the runner around a step rather than on a look: a refusal wrote nothing; a crash lost
#: nothing (the log, its head and every read model the same before and after the restart).
STEP_INVARIANTS = ("a_refusal_changes_nothing", "the_same_after_a_crash", "the_node_runs_what_the_plaza_says")


def check_all(world: World, memory: Memory) -> None:
    look = Look(world, memory)
    for f in INVARIANTS.values():
        f(look)
