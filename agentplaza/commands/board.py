"""The board's commands: post, reply, pause and resume deliveries, and an agent's read marker.

A post (or reply) and the delivery of its mentions are one commit: the board's event, and for each
named agent that can take work the ``Agent.Told`` (with its transcript entry) that puts the post in
its queue, waking it first if it sleeps. The delivery's ``ref`` (``board:p3``, ``board:p3.r1``) makes
it happen once per agent, whatever is retried. While deliveries are paused the post is kept and its
mentions wait in the board; the resume delivers them in its own commit.
"""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.board import BOARD_ID, Board, BoardMarker, Member, author_cid, marker_id, named
from ..domain.names import post_number
from .agents import agent_in, registries_in, transcript_in
from .tasks import load_in as task_in
from .unit import Commands, Done, Unit


def board_in(unit: Unit, ctx: Context) -> Board:
    return unit.get(BOARD_ID) or Board.open(ctx)


def roster_in(unit: Unit) -> list[Member]:
    """Every agent that can be named: not deleted (a stopped or retired one is named, and not told)."""
    out = []
    for cid in sorted((c for n in registries_in(unit) for c in n.cids), key=int):
        a = agent_in(unit, int(cid))
        if a is not None and not a.deleted:
            out.append(Member(a.cid, a.name, a.role))
    return out


def delivery_text(key: str, by: str, project: str | None, text: str) -> str:
    where = f" on project {project}'s board" if project else " on the board"
    post = key.split(".")[0]
    return (f"You were mentioned in {key} by {by}{where}:\n{text}\n"
            f"Read the board with plaza_board_read; answer with plaza_board_post and reply_to {post}.")


def deliver_in(unit: Unit, cmds: Commands, ctx: Context, cids: list[int], key: str, by: str,
               project: str | None, text: str) -> list[int]:
    """Tell each agent the post, once (``ref``); the CIDs told. One that cannot take work (stopped,
    retired) or was told already is left out."""
    told = []
    body = delivery_text(key, by, project, text)
    for cid in cids:
        a = agent_in(unit, cid)
        item = "w-" + cmds.new_id()[:12]
        try:
            a.tell(ctx, item, body, ref=f"board:{key}")
        except Refusal:
            continue
        tr = transcript_in(unit, a)
        tr.add(ctx, "told", text=body, detail={"item": item, "from": by, "board": key})
        unit.add(a, tr)
        told.append(cid)
    return told


def post(cmds: Commands, ctx: Context, text: str, project: str | None = None, task: str | None = None,
         file: str | None = None) -> Done[dict]:
    """A post (``file``: a public shared file it carries, checked by the caller: ``runtime.files``)."""

    def decide(unit: Unit) -> dict:
        b = board_in(unit, ctx)
        number_of_task = task_in(unit, task).number if task is not None else None
        mentions = named(text, roster_in(unit), b.members_of(project), author_cid(ctx.actor))
        number = b.post(ctx, text, project, number_of_task, mentions, file)
        held = b.is_paused(project)
        shown = f"{text}\nShared file: {file} (read it with plaza_file_read)" if file else text
        told = [] if held else deliver_in(unit, cmds, ctx, mentions, number, ctx.actor, project, shown)
        unit.add(b)
        return {"id": number, "mentions": mentions, "delivered": told, "held": held, **({"file": file} if file else {})}

    return cmds.run(decide)


def reply(cmds: Commands, ctx: Context, post_id: str, text: str) -> Done[dict]:
    number = post_number(post_id)

    def decide(unit: Unit) -> dict:
        b = board_in(unit, ctx)
        if not b.holds(number):
            b.reply(ctx, number, text, [])  # refuses: no such post
        project = b.project_of_post(number)
        mentions = named(text, roster_in(unit), b.members_of(project), author_cid(ctx.actor))
        n = b.reply(ctx, number, text, mentions)
        key = f"{number}.r{n}"
        held = b.is_paused(project)
        told = [] if held else deliver_in(unit, cmds, ctx, mentions, key, ctx.actor, project, text)
        unit.add(b)
        return {"id": number, "reply": n, "mentions": mentions, "delivered": told, "held": held}

    return cmds.run(decide)


def pause(cmds: Commands, ctx: Context, on: bool, project: str | None = None) -> Done[dict]:
    """Pause (on) or resume (off) deliveries for the whole board or one project; a resume delivers
    the mentions that waited, in its own commit."""
    def decide(unit: Unit) -> dict:
        b = board_in(unit, ctx)
        if on:
            b.pause(ctx, project)
            unit.add(b)
            return {"project": project, "paused": True, "released": {}}
        released = b.resume(ctx, project)
        told = {key: deliver_in(unit, cmds, ctx, held["cids"], key, held["by"],
                                b.project_of_post(key.split(".")[0]), held["text"])
                for key, held in released.items()}
        unit.add(b)
        return {"project": project, "paused": False, "released": told}

    return cmds.run(decide)


def seen(cmds: Commands, ctx: Context, cid: int, upto: int) -> Done[bool]:
    """An agent was shown the board up to post ``upto``: its marker moves there (never back)."""
    def decide(unit: Unit) -> bool:
        m = unit.get(marker_id(cid)) or BoardMarker.open(ctx, cid)
        moved = m.seen(ctx, upto)
        unit.add(m)
        return moved

    return cmds.run(decide)


def marker(cmds: Commands, cid: int) -> int:
    m = cmds.store.get(marker_id(cid))
    return m.upto if m is not None else 0
