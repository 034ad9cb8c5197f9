"""The board's read model, and the queries the Board screen, ``agentplaza board`` and the agents'
``plaza_board_read`` read.

- ``rm_board_posts``: one row per post the board keeps (a dropped post's row goes, with its replies).
- ``rm_board_replies``: one row per reply, by (post, reply number).
- ``rm_board_pauses``: one row per paused scope ("" is the whole board, else a project id).
- ``rm_board_markers``: one row per agent: the highest post it has been shown.

Every handler is O(1) per event, but a drop, which removes the post's replies.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.board import WHOLE, post_index
from ..events.records import EventRecord
from .framework import Projection, Rows, evictable, metadata

posts = evictable(sa.Table(
    "rm_board_posts", metadata,
    sa.Column("id", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False, index=True),
    sa.Column("project", sa.String(64), index=True),
    sa.Column("task", sa.String(24)),
    sa.Column("file", sa.String(24)),  # a shared file the post carries
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("mentions", sa.JSON, nullable=False),
    sa.Column("held", sa.Boolean, nullable=False),  # its mentions wait for a resume
    sa.Column("replies", sa.Integer, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
))

replies = evictable(sa.Table(
    "rm_board_replies", metadata,
    sa.Column("post", sa.String(24), primary_key=True),
    sa.Column("reply", sa.Integer, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("mentions", sa.JSON, nullable=False),
    sa.Column("held", sa.Boolean, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
))

pauses = sa.Table(
    "rm_board_pauses", metadata,
    sa.Column("scope", sa.String(64), primary_key=True),
    sa.Column("by", sa.String(200), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
)

markers = sa.Table(
    "rm_board_markers", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.BigInteger, nullable=False, unique=True),
    sa.Column("upto", sa.BigInteger, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
)

class BoardProjection(Projection):
    name = "board"
    version = 2
    tables = (posts, replies, pauses, markers)

    def on_Board_Posted(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.add("rm_board_posts", {  # (the board numbers each post anew)
            "id": d["number"], "seq": post_index(d["number"]), "project": d["project"], "task": d["task"],
            "file": d.get("file"),
            "text": d["text"], "author": e.actor, "mentions": d["mentions"], "held": d["held"] and bool(d["mentions"]),
            "replies": 0, "at": e.at, "position": e.position})

    def on_Board_Replied(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        post = rows.get("rm_board_posts", d["post"])
        if post is not None:
            rows.put("rm_board_posts", {**post, "replies": d["reply"]})
        rows.put("rm_board_replies", {
            "post": d["post"], "reply": d["reply"], "text": d["text"], "author": e.actor, "mentions": d["mentions"],
            "held": d["held"] and bool(d["mentions"]), "at": e.at, "position": e.position})

    def on_Board_Dropped(self, e: EventRecord, rows: Rows) -> None:
        number = e.data["number"]
        post = rows.get("rm_board_posts", number)
        if post is not None:
            for n in range(1, post["replies"] + 1):
                rows.delete("rm_board_replies", (number, n))
        rows.delete("rm_board_posts", number)

    def on_Board_Paused(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_board_pauses", {"scope": e.data["project"] or WHOLE, "by": e.actor, "at": e.at})

    def on_Board_Resumed(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_board_pauses", e.data["project"] or WHOLE)
        for key in e.data["released"]:
            post, _, reply = key.partition(".r")
            if reply:
                row = rows.get("rm_board_replies", (post, int(reply)))
                if row is not None:
                    rows.put("rm_board_replies", {**row, "held": False})
            else:
                row = rows.get("rm_board_posts", post)
                if row is not None:
                    rows.put("rm_board_posts", {**row, "held": False})

    def on_BoardMarker_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_board_markers", {"id": e.originator_id, "cid": e.data["cid"], "upto": 0, "at": e.at})

    def on_BoardMarker_Seen(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_board_markers", e.originator_id)
        if row is not None:
            rows.put("rm_board_markers", {**row, "upto": e.data["upto"], "at": e.at})


# -- queries --------------------------------------------------------------------------------------------

def paused(read_models) -> list[str]:
    """The paused scopes: "" (the whole board) and project ids."""
    return [r["scope"] for r in read_models.rows(pauses, order_by=pauses.c.scope)]


def is_paused(read_models, project: str | None) -> bool:
    scopes = paused(read_models)
    return WHOLE in scopes or (project is not None and project in scopes)


def post_rows(read_models, project: str | None = None, after: int = 0, limit: int | None = None,
              newest_first: bool = True) -> list[dict]:
    where = [posts.c.seq > after]
    if project is not None:
        where.append(posts.c.project == project)
    order = sa.desc(posts.c.seq) if newest_first else posts.c.seq
    return read_models.rows(posts, *where, order_by=order, limit=limit)


def board(read_models, project: str | None, limit: int) -> dict:
    """What the Board screen shows: the newest posts, and whether deliveries are paused here."""
    return {"project": project, "paused": is_paused(read_models, project), "paused_scopes": paused(read_models),
            "posts": post_rows(read_models, project, limit=limit)}


def post_row(read_models, number: str) -> dict:
    found = read_models.rows(posts, posts.c.id == number)
    if not found:
        raise Refusal("no_post", f"no post {number} on the board")
    row = dict(found[0])
    row["thread"] = read_models.rows(replies, replies.c.post == number, order_by=replies.c.reply)
    return row


def marker_of(read_models, cid: int) -> int:
    found = read_models.rows(markers, markers.c.cid == cid)
    return found[0]["upto"] if found else 0


def thread(read_models, project: str | None) -> list[dict]:
    """Every post (oldest first) with its replies: the export."""
    out = []
    for p in post_rows(read_models, project, newest_first=False):
        out.append({**p, "thread": read_models.rows(replies, replies.c.post == p["id"], order_by=replies.c.reply)})
    return out


def export_markdown(items: list[dict], project: str | None) -> str:
    title = f"# The board: project {project}" if project else "# The board"
    lines = [title, ""]
    for p in items:
        head = f"## {p['id']} by {p['author']}, {p['at']}"
        if p.get("task"):
            head += f" (task {p['task']})"
        if p.get("project") and not project:
            head += f" [project {p['project']}]"
        lines += [head, "", p["text"].rstrip(), ""]
        for r in p["thread"]:
            lines += [f"> **{r['author']}**, {r['at']} (reply {r['reply']}):", ">"]
            lines += [f"> {line}" if line else ">" for line in r["text"].rstrip().splitlines()]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def export(read_models, project: str | None, fmt: str) -> str:
    items = thread(read_models, project)
    if fmt == "json":
        return json.dumps({"project": project, "posts": items}, indent=2, default=str) + "\n"
    return export_markdown(items, project)


def counts(read_models) -> dict:
    """The overview's board line."""
    with read_models.engine.connect() as conn:
        n = conn.execute(sa.select(sa.func.count()).select_from(posts)).scalar_one()
    return {"posts": n, "paused": bool(paused(read_models))}
