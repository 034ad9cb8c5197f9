"""agentplaza board list [--project ID] | show ID | post [--project ID] [--task T] TEXT | reply ID --text TEXT
| pause [--project ID] on|off | export [--project ID] [--format md|json] [-o FILE] [--force].
A TEXT of ``-`` is read from standard input."""

from __future__ import annotations

import os
import sys

from ..actions import Action, Area, arg
from ..env import Env
from ..output import pairs, refuse, table

POST_COLUMNS = ["id", "at", "author", "project", "task", "replies", "held", "text"]
PROJECT = arg("--project", help="one project's board (default: the whole board)")


def text_of(value: str) -> str:
    """The text as given, or standard input for ``-``."""
    return sys.stdin.read() if value == "-" else value


def render_list(d: dict) -> str:
    banner = "Paused: deliveries wait until the board resumes\n" if d["paused"] else ""
    return banner + table(d["posts"], POST_COLUMNS)


def render_show(d: dict) -> str:
    head = pairs({k: d[k] for k in ("id", "at", "author", "project", "task", "mentions", "held", "replies")})
    lines = [head, "", d["text"].rstrip()]
    for r in d["thread"]:
        lines += ["", f"-- reply {r['reply']} by {r['author']}, {r['at']}", r["text"].rstrip()]
    return "\n".join(lines)


def render_posted(d: dict) -> str:
    told = ", ".join(str(c) for c in d["delivered"]) or "nobody"
    if d["held"]:
        return f"posted {d['id']}: deliveries are paused; {len(d['mentions'])} mention(s) wait until it resumes"
    return f"posted {d['id']}" + (f" (reply {d['reply']})" if "reply" in d else "") + f"; delivered to {told}"


def render_pause(d: dict) -> str:
    where = f"project {d['project']}" if d["project"] else "the whole board"
    if d["paused"]:
        return f"deliveries paused for {where}"
    released = sum(len(v) for v in d["released"].values())
    return f"deliveries resumed for {where}; {released} waiting mention(s) delivered"


def export(env: Env) -> int:
    a = env.args
    d = env.client.get("/v1/board/export", **{k: v for k, v in (("project", a.project), ("format", a.format)) if v})
    if a.output is None:
        sys.stdout.write(d["text"])
        return 0
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if a.force else os.O_EXCL)
    try:
        fd = os.open(a.output, flags, 0o600)
    except FileExistsError:
        return refuse(f"{a.output} exists; pass --force to replace it", "file_exists")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(d["text"])
    print(f"exported {a.output}")
    return 0


AREA = Area("board", "the board: posts, replies, @mentions, pausing deliveries, export", (
    Action("list", "the newest posts (and whether deliveries are paused)", "GET", "/v1/board",
           args=(PROJECT, arg("--limit", type=int, default=100)),
           query=lambda a: {k: v for k, v in (("project", a.project), ("limit", a.limit)) if v is not None},
           render=render_list, default=True),
    Action("show", "one post with its replies", "GET", "/v1/board/{id}", args=(arg("id", help="the post, like p3"),),
           render=render_show),
    Action("post", "post as the owner: @name names an agent by name or role, @all everyone on the project",
           "POST", "/v1/board",
           args=(PROJECT, arg("--task", help="the task the post names, like t3"),
                 arg("text", help="the post; - reads it from standard input")),
           body=lambda a: {k: v for k, v in (("text", text_of(a.text)), ("project", a.project), ("task", a.task))
                           if v is not None},
           render=render_posted),
    Action("reply", "reply to a post", "POST", "/v1/board/{id}/replies",
           args=(arg("id", help="the post, like p3"), arg("--text", required=True, help="the reply; - reads stdin")),
           body=lambda a: {"text": text_of(a.text)}, render=render_posted),
    Action("pause", "pause (on) or resume (off) deliveries for the whole board or one project", "POST",
           "/v1/board/pause", args=(PROJECT, arg("state", choices=("on", "off"))),
           body=lambda a: {"on": a.state == "on", **({"project": a.project} if a.project else {})},
           render=render_pause),
    Action("export", "export the thread (Markdown by default) to standard output or a file", run=export,
           args=(PROJECT, arg("--format", choices=("md", "json"), default="md"),
                 arg("-o", "--output", help="write to this file (refused if it exists, unless --force)"),
                 arg("--force", action="store_true", help="replace an existing file"))),
))
