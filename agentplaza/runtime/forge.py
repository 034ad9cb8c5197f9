"""The plaza's git server: the repositories on disk (``gitstore``), git's smart HTTP (``githttp``), and
the commands that record what the plaza must know (``commands.git``), for the owner and for agents.

Who may do what is law: every agent's push, pull-request, review and merge goes through the same check
as any tool call (``tooldecide.check_in``: the permission mode, approvals, the laws, the violation and
its sanctions, one transcript entry, one commit). An agent's push is the tool ``plaza_git`` with
``op`` push and the ``repo``, ``branch``, ``force`` and ``protected`` facts the hub reads from the
push itself (never the agent's word). An agent's push may only fast-forward (``receive.denyNonFastForwards``
for its pushes): no agent rewrites history, so ``force`` is always false for it. The owner may do anything
the domain allows.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..commands import git as gc
from ..commands.unit import Done, Unit
from ..domain.agents import LOCAL_NODE, node_id, transcript_id
from ..domain.base import Context, Refusal
from ..domain.git import BRANCH_PREFIX, ZERO, pr_number
from ..domain.nodes import range_node
from . import gitrepair
from .githttp import GitAnswer, GitRequest, serve
from .gitstore import MAX_SHOWN_BYTES, REPOS_DIR, GitStore

#: The owner's name on the merge commits the owner makes.
OWNER_AUTHOR = ("owner", "owner@plaza.invalid")
#: Git configuration for an agent's push: fast-forwards only.
AGENT_PUSH_CONFIG = (("receive.denyNonFastForwards", "true"), ("receive.denyDeletes", "true"))


@dataclass(frozen=True)
class Caller:
    """Who calls the git server: the owner, or an agent by its CID (known from its channel, never a token)."""
    actor: str  # "owner" or "agent:<cid>"

    @property
    def cid(self) -> str | None:
        return self.actor.split(":", 1)[1] if self.actor.startswith("agent:") else None


OWNER = Caller("owner")


def agent_record(hub: Any, cid: str) -> Any:
    n = hub.commands.store.get(node_id(range_node(int(cid)) or LOCAL_NODE)) if cid.isdigit() and len(cid) < 10 else None
    if n is None or not n.holds(int(cid)):
        raise Refusal("unknown_agent", f"no agent {cid}")
    a = hub.commands.store.get(n.agent_of(int(cid)))
    if a is None or a.deleted:
        raise Refusal("unknown_agent", f"no agent {cid}")
    return a


def author_of(hub: Any, caller: Caller) -> tuple[str, str]:
    if caller.cid is None:
        return OWNER_AUTHOR
    a = agent_record(hub, caller.cid)
    return (a.name or f"{a.role}-{caller.cid}", f"agent-{caller.cid}@agents.plaza.invalid")


def law_check(hub: Any, caller: Caller, tool: str, args: dict) -> None:
    """An agent's call, decided as any tool call and recorded in its transcript; refused unless allowed."""
    if caller.cid is None:
        return
    from . import tooldecide  # here, not at the top: tools -> hosttools -> forge -> tooldecide -> tools

    agent = agent_record(hub, caller.cid)

    def decide(unit: Unit):
        c = tooldecide.check_in(unit, hub, agent, tool, args)
        d = c.decision
        t = unit.get(transcript_id(agent.id))
        if t is not None:
            t.add(hub.commands.context(caller.actor), "tool_call", None, tool=tool, detail={
                "effect": d.effect, "reason": d.reason, "law": d.forbidding, "violation": d.violation,
                "decision_id": c.call_id or None, "mode": c.mode, "approval": c.approval,
                "args": str(sorted(args.items()))[:500]})
            unit.add(t)
        return c

    c = hub.commands.run(decide).value
    d = c.decision
    if d.effect == "ask":
        raise Refusal("approval_pending", f"{tool} waits for the owner's approval {c.approval}; once it is approved, "
                      "do the same again and it runs once")
    if d.effect != "allow":
        raise Refusal("not_allowed", c.extra.get("message") or f"{tool} refused ({d.reason}"
                      + (f", {d.forbidding}" if d.forbidding else "") + ")")


class GitServer:
    def __init__(self, hub: Any):
        self.hub = hub
        self.cmds = hub.commands
        self.store = GitStore(hub.folders.state / REPOS_DIR, clock=self.cmds.clock)  # commits dated by the hub's clock
        #: The refs a hub that died between git and the log left moved, put back before anything is served.
        self.repaired = gitrepair.repair(self.store, self.cmds.store)

    def ctx(self, caller: Caller, reason: str | None = None) -> Context:
        return self.cmds.context(caller.actor, reason)

    # -- repositories ----------------------------------------------------------------------------------
    def create(self, caller: Caller, name: str, project: str | None = None) -> Done[str]:
        law_check(self.hub, caller, "plaza_git", {"op": "create", "repo": name})
        try:
            gc.repo_of(self.cmds, name)
            raise Refusal("repo_exists", f"the repository {name} exists already")
        except Refusal as r:
            if r.code != "no_repo":
                raise
        with self.store.lock(name):
            if self.store.exists(name):  # made on disk by a hub that stopped before recording it
                head = self.store.resolve(name, "main")
            else:
                head = self.store.init(name)
            return gc.create_repo(self.cmds, self.ctx(caller), name, head, project)

    # -- smart HTTP ------------------------------------------------------------------------------------
    def http(self, caller: Caller, req: GitRequest) -> Done[GitAnswer]:
        repo = gc.repo_of(self.cmds, req.repo)
        pushing = req.rest == "git-receive-pack"
        if caller.cid is not None and not pushing:
            law_check(self.hub, caller, "plaza_git", {"op": "fetch", "repo": repo.name})

        def authorize(moves: list[dict]) -> None:
            for m in moves:  # the laws first (an owner's rule on protected branches makes an infraction) ...
                branch = m["ref"][len(BRANCH_PREFIX):] if m["ref"].startswith(BRANCH_PREFIX) else m["ref"]
                law_check(self.hub, caller, "plaza_git", {
                    "op": "push", "repo": repo.name, "branch": branch, "force": False,
                    "delete": m["new"] == ZERO, "protected": branch == repo.default_branch})
            gc.check_push(self.cmds, caller.actor, repo.name, moves)  # ... then the server's own rules

        positions: list[int] = []

        def record(moves: list[dict]) -> None:
            positions.extend(gc.pushed(self.cmds, self.ctx(caller), repo.name, moves).positions)

        answer = serve(self.store, req, caller.actor, authorize, record, AGENT_PUSH_CONFIG if caller.cid is not None else ())
        return Done(answer, positions)

    # -- pull requests ---------------------------------------------------------------------------------
    def open_pr(self, caller: Caller, name: str, source: str, target: str | None, title: str, body: str,
                decided: bool = False) -> Done[str]:
        """``decided``: the laws already allowed this call (a host tool's, checked by the session)."""
        if not decided:
            law_check(self.hub, caller, "plaza_git", {"op": "open_pr", "repo": name, "branch": source})
        gc.repo_of(self.cmds, name)
        return gc.open_pr(self.cmds, self.ctx(caller), name, source, target, title, body, self.store.heads(name))

    def comment(self, caller: Caller, number: str, text: str, decided: bool = False) -> Done[str]:
        pr = gc.pr_of(self.cmds, number)
        if not decided:
            law_check(self.hub, caller, "plaza_git", {"op": "comment", "repo": pr.repo, "pr": pr.number})
        return gc.comment(self.cmds, self.ctx(caller), pr.number, text)

    def review(self, caller: Caller, number: str, verdict: str, text: str, decided: bool = False) -> Done[str]:
        pr = gc.pr_of(self.cmds, number)
        if not decided:
            law_check(self.hub, caller, "plaza_git_review", {"repo": pr.repo, "pr": pr.number, "verdict": verdict,
                                                             "own": pr.author == caller.actor})
        head = self.store.resolve(pr.repo, pr.source)
        return gc.review(self.cmds, self.ctx(caller), pr.number, verdict, text, head)

    def merge(self, caller: Caller, number: str, method: str = "auto", decided: bool = False) -> Done[str]:
        pr = gc.check_merge(self.cmds, number)
        if not decided:
            law_check(self.hub, caller, "plaza_git_merge", {"repo": pr.repo, "pr": pr.number, "branch": pr.target,
                                                            "own": pr.author == caller.actor})
        who = author_of(self.hub, caller)
        with self.store.lock(pr.repo):
            head = self.store.resolve(pr.repo, pr.source)
            used, new, old = self.store.merge(pr.repo, pr.target, head, method, who,
                                              f"Merge {pr.number}: {pr.title}\n\n{pr.source} into {pr.target}")
            try:
                return gc.merged(self.cmds, self.ctx(caller), pr.number, used, new, old, head)
            except Exception:  # the log refused it: the branch goes back (a dying process undoes nothing)
                self.store.run(pr.repo, "update-ref", BRANCH_PREFIX + pr.target, old, new)
                raise

    def close(self, caller: Caller, number: str, decided: bool = False) -> Done[str]:
        pr = gc.pr_of(self.cmds, number)
        if not decided:
            law_check(self.hub, caller, "plaza_git", {"op": "close", "repo": pr.repo, "pr": pr.number,
                                                      "own": pr.author == caller.actor})
        return gc.close(self.cmds, self.ctx(caller), pr.number)

    def facts(self, caller: Caller, args: dict) -> dict:
        """What the hub knows about a git call that the laws read (``own``, ``branch``, ``protected``),
        never the agent's word."""
        out: dict = {}
        if args.get("pr") is not None:
            pr = gc.pr_of(self.cmds, args["pr"])
            out.update(own=pr.author == caller.actor, branch=pr.target if args.get("op") is None else pr.source,
                       repo=pr.repo)
        elif args.get("repo") and args.get("source"):
            out.update(branch=args["source"])
        return out

    def diff(self, number: str) -> dict:
        pr = gc.pr_of(self.cmds, pr_number(number))
        if pr.state == "merged":
            return self.store.diff(pr.repo, pr.base, pr.head)
        return self.store.diff(pr.repo, self.store.resolve(pr.repo, pr.target), self.store.resolve(pr.repo, pr.source))


    def changes(self, number: str) -> list[dict]:
        """A pull request's files as they were and as they are: ``path``, ``old`` and ``new`` text (None where
        the file is not there on that side), ``binary`` where either side is not text, each side cut at
        ``MAX_SHOWN_BYTES`` (``cut``). What an editor shows as diffs, and what write-back writes."""
        pr = gc.pr_of(self.cmds, pr_number(number))
        d = self.diff(number)
        out = []
        for f in d["files"]:
            old, old_bin, old_cut = self._text_at(pr.repo, d["base"], f["path"])
            new, new_bin, new_cut = self._text_at(pr.repo, d["head"], f["path"])
            out.append({"path": f["path"], "old": old, "new": new, "binary": old_bin or new_bin,
                        "cut": old_cut or new_cut})
        return out

    def _text_at(self, repo: str, commit: str, path: str) -> tuple[str | None, bool, bool]:
        r = self.store.run(repo, "cat-file", "blob", f"{commit}:{path}", ok=(0, 128))
        if r.returncode != 0:
            return None, False, False
        data = r.stdout
        if b"\0" in data[:8000]:
            return None, True, False
        try:
            if len(data) > MAX_SHOWN_BYTES:  # a cut may split a character: shown, never written back
                return data[:MAX_SHOWN_BYTES].decode(errors="replace"), False, True
            return data.decode(), False, False
        except UnicodeDecodeError:
            return None, True, False


_MAKING = threading.Lock()


def server_of(hub: Any) -> GitServer:
    """The hub's git server, made once per hub (apid makes it before it listens): its repositories' refs
    are first set to what the log says (``gitrepair``)."""
    found = hub.__dict__.get("_git_server")
    if found is None:
        with _MAKING:
            found = hub.__dict__.get("_git_server")
            if found is None:
                found = hub.__dict__["_git_server"] = GitServer(hub)
    return found
