"""The git server's commands: each decision in one unit of work (see ``domain.git``).

The bytes are git's (``runtime.gitstore`` does the I/O); these record what the plaza must know: a
repository created, a push's ref moves, a pull request opened, commented, reviewed, merged or closed.
A merge is checked here first (``check_merge``), made by git, then recorded (``merged``).
"""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.git import FORGE_ID, Forge, PullRequest, Repo, check_move, pr_id, pr_number, repo_id, repo_name
from .unit import Commands, Done, Unit


def load_repo(unit: Unit, name: str) -> Repo:
    repo = unit.get(repo_id(repo_name(name)))
    if repo is None:
        raise Refusal("no_repo", f"no repository {name!r} on this plaza's git server")
    return repo


def load_pr(unit: Unit, number: str) -> PullRequest:
    number = pr_number(number)
    pr = unit.get(pr_id(number))
    if pr is None:
        raise Refusal("no_pull_request", f"no pull request {number}")
    return pr


def repo_of(cmds: Commands, name: str) -> Repo:
    return load_repo(Unit(cmds.store), name)


def pr_of(cmds: Commands, number: str) -> PullRequest:
    return load_pr(Unit(cmds.store), number)


def create_repo(cmds: Commands, ctx: Context, name: str, head: str, project: str | None = None) -> Done[str]:
    def decide(unit: Unit) -> str:
        if unit.get(repo_id(repo_name(name))) is not None:
            raise Refusal("repo_exists", f"the repository {name} exists already")
        unit.add(Repo.create(ctx, name, head, project))
        return name

    return cmds.run(decide)


def pushed(cmds: Commands, ctx: Context, name: str, moves: list[dict]) -> Done[int]:
    """The ref moves git accepted for one push; the number of moves."""
    def decide(unit: Unit) -> int:
        repo = load_repo(unit, name)
        repo.pushed(ctx, moves)
        unit.add(repo)
        return len(moves)

    return cmds.run(decide)


def check_push(cmds: Commands, actor: str, name: str, moves: list[dict]) -> None:
    """Refuses a push (before git receives it) that the domain's rules forbid to ``actor``."""
    repo = repo_of(cmds, name)
    for m in moves:
        check_move(repo, actor, m["ref"], m["old"], m["new"])


def open_pr(cmds: Commands, ctx: Context, name: str, source: str, target: str | None, title: str, body: str,
            heads: dict[str, str]) -> Done[str]:
    """``heads``: each branch's commit as git has it now (the source and the target must be there)."""
    def decide(unit: Unit) -> str:
        repo = load_repo(unit, name)
        into = target or repo.default_branch
        for b in (source, into):
            if b not in heads:
                raise Refusal("no_branch", f"{name} has no branch {b!r}")
        forge = unit.get(FORGE_ID) or Forge.open(ctx)
        number = forge.next_number(ctx)
        pr = PullRequest.open(ctx, number, repo, source, into, title, body, heads[source], heads[into])
        unit.add(forge, repo, pr)
        return number

    return cmds.run(decide)


def comment(cmds: Commands, ctx: Context, number: str, text: str) -> Done[str]:
    def decide(unit: Unit) -> str:
        pr = load_pr(unit, number)
        pr.comment(ctx, text)
        unit.add(pr)
        return pr.number

    return cmds.run(decide)


def review(cmds: Commands, ctx: Context, number: str, verdict: str, text: str, head: str) -> Done[str]:
    def decide(unit: Unit) -> str:
        pr = load_pr(unit, number)
        pr.review(ctx, verdict, text, head)
        unit.add(pr)
        return pr.number

    return cmds.run(decide)


def check_merge(cmds: Commands, number: str) -> PullRequest:
    """The pull request, if it may be merged now (open); git then makes the merge."""
    pr = pr_of(cmds, number)
    pr.check_mergeable()
    return pr


def merged(cmds: Commands, ctx: Context, number: str, method: str, commit: str, old: str, head: str) -> Done[str]:
    def decide(unit: Unit) -> str:
        pr = load_pr(unit, number)
        repo = load_repo(unit, pr.repo)
        pr.merged(ctx, repo, method, commit, old, head)
        unit.add(pr, repo)
        return commit

    return cmds.run(decide)


def close(cmds: Commands, ctx: Context, number: str) -> Done[str]:
    def decide(unit: Unit) -> str:
        pr = load_pr(unit, number)
        repo = load_repo(unit, pr.repo)
        pr.close(ctx, repo)
        unit.add(pr, repo)
        return pr.number

    return cmds.run(decide)
