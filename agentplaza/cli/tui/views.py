"""What the terminal screen draws, from its state alone (``tui/model.py``). Pure: no terminal, no I/O.

``screen(model, width, height, colour)`` gives the whole screen as lines, each a list of
``(style, text)`` fragments as prompt-toolkit draws them; ``text(lines)`` is the same without
styles (what a test reads). Without colours every mark that a colour carries is also in the text
(the selected row's ``>``, the tab in brackets, the banner in capitals), so nothing is lost.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .model import NOT_BUILT, TABS, Model

#: The smallest terminal the screen draws in; a smaller one gets one clear message instead.
MIN_WIDTH, MIN_HEIGHT = 60, 16
#: The most lines the hold's banner takes.
BANNER_LINES = 3
#: The most transcript entries an agent's detail shows.
DETAIL_ENTRIES = 8

Line = list[tuple[str, str]]

#: Each status's robot: antenna, face, body, feet; unknown statuses get a puzzled face.
ROBOTS = {
    "idle": ("  _n_  ", " [o.o] ", " /[_]\\ ", "  ' '  "),
    "working": ("  _*_  ", " [>.<] ", " /[#]\\ ", "  ' '  "),
    "asleep": ("  _n_ z", " [-.-] ", " /[_]\\ ", "  ' '  "),
    "offline": ("  ___  ", " [x.x] ", "  [_]  ", "  ' '  "),
}
PUZZLED = ("  _?_  ", " [?.?] ", " /[_]\\ ", "  ' '  ")
ROBOT_STYLE = {"idle": "class:idle", "working": "class:working", "asleep": "class:asleep", "offline": "class:offline"}
#: The width of one robot's place on the floor, and its height (robot, name, status, a gap).
CELL_WIDTH, CELL_HEIGHT = 14, 7


def _fit(text: str, width: int) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def table(rows: list[dict], columns: list[tuple[str, str]], width: int, selected: int | None,
          colour: bool) -> list[Line]:
    """Rows as columns (``(key, HEADER)``), the last one taking what width is left."""
    if not rows:
        return [[("", "  (none)")]]
    cells = [[_cell(r.get(k)) for k, _ in columns] for r in rows]
    widths = [min(max(len(h), *(len(c[i]) for c in cells)), 24) for i, (_, h) in enumerate(columns)]
    used = sum(widths[:-1]) + 2 * len(widths) + 2
    widths[-1] = max(width - used, 8)
    head = "  " + "  ".join(h.ljust(w) for (_, h), w in zip(columns, widths))
    out: list[Line] = [[("class:header", _fit(head, width))]]
    for i, c in enumerate(cells):
        mark = "> " if i == selected else "  "
        row = mark + "  ".join(_fit(v, w).ljust(w) for v, w in zip(c, widths))
        out.append([("class:selected" if i == selected and colour else "", _fit(row, width))])
    return out


def tab_bar(m: Model, width: int, colour: bool) -> Line:
    """Every tab with its key; where the whole names do not fit, the others are cut to a few letters."""
    for short in (None, 5, 3):
        parts: Line = []
        for i, t in enumerate(TABS):
            title = t.title if short is None or i == m.tab else t.title[:short]
            if i == m.tab:
                parts.append(("class:tab.current", f"[{t.key} {title}]"))
            else:
                parts.append(("class:tab", f"{t.key} {title}"))
            parts.append(("", " "))
        if sum(len(x) for _, x in parts) <= width:
            break
    return _clip(parts, width)


def _clip(parts: Line, width: int) -> Line:
    out: Line = []
    left = width
    for style, text in parts:
        if left <= 0:
            break
        out.append((style, text[:left]))
        left -= len(text[:left])
    return out


def banner(m: Model, width: int) -> list[Line]:
    """The hold, on every tab: who, since when, why."""
    if not m.held:
        return []
    p = m.plaza
    why = p.get("reason") or "no reason given"
    text = f"PLAZA HELD (STOP ALL) since {_when(p.get('since'))} by {p.get('by')}; s resumes. Why: {why}"
    lines = textwrap.wrap(_fit(text, 1000), width - 2)[:BANNER_LINES]
    return [[("class:banner", f" {_fit(t, width - 2)} ".ljust(width))] for t in lines]


def _when(at: Any) -> str:
    s = str(at or "-")
    return s[:19].replace("T", " ") if len(s) >= 19 else s


# -- the tabs ------------------------------------------------------------------------------


def floor(m: Model, width: int, height: int, colour: bool) -> list[Line]:
    agents = m.items()
    if not agents:
        return [[("", "  The floor is empty: no agents yet (agentplaza agents create --role researcher).")]]
    per_row = max(width // CELL_WIDTH, 1)
    sel = m.selection()
    out: list[Line] = []
    for start in range(0, len(agents), per_row):
        group = agents[start:start + per_row]
        if len(out) + CELL_HEIGHT > height:
            out.append([("", f"  ... and {len(agents) - start} more (see the Agents tab)")])
            break
        rows: list[Line] = [[] for _ in range(CELL_HEIGHT - 1)]
        for j, a in enumerate(group):
            status = str(a.get("status") or "")
            robot = ROBOTS.get(status, PUZZLED)
            style = ROBOT_STYLE.get(status, "") if colour else ""
            mark = ">" if start + j == sel else " "
            for k in range(4):
                rows[k].append((style, (mark if k == 1 else " ") + robot[k].ljust(CELL_WIDTH - 1)))
            rows[4].append(("class:name", " " + _fit(a.get("name") or a.get("cid"), CELL_WIDTH - 2).ljust(CELL_WIDTH - 1)))
            rows[5].append((style, " " + _fit(status or "?", CELL_WIDTH - 2).ljust(CELL_WIDTH - 1)))
        out += rows
        out.append([])
    return out


def overview(m: Model, width: int, colour: bool) -> list[Line]:
    o = m.data.get("overview")
    if not o:
        return [[("", "  loading ...")]]
    p, a, t = o.get("plaza") or {}, o.get("agents") or {}, o.get("tasks") or {}
    ap, tr, ev = o.get("approvals") or {}, o.get("treasury") or {}, o.get("events") or {}
    lines = [
        ("plaza", f"{p.get('state')} since {_when(p.get('since'))}"),
        ("agents", f"{a.get('total', 0)}  " + ", ".join(f"{k} {v}" for k, v in (a.get("by_status") or {}).items())),
        ("tasks", ", ".join(f"{k} {v}" for k, v in t.items())),
        ("approvals", f"{ap.get('pending', 0)} pending"),
        ("budget", f"{tr.get('budget')} credits ({tr.get('budget_usd')}), {tr.get('in_circulation')} in circulation"),
        ("models", f"{(o.get('models') or {}).get('providers')} providers, {(o.get('models') or {}).get('model_calls')} calls"),
        ("vault", str((o.get("vault") or {}).get("state"))),
        ("events", f"{ev.get('total')} in the log"),
        ("hub", f"{(o.get('hub') or {}).get('address')}  {(o.get('hub') or {}).get('version')}"),
    ]
    return [[("class:label", f"  {k:<10}"), ("", _fit(v, width - 12))] for k, v in lines]


def agents(m: Model, width: int, colour: bool) -> list[Line]:
    cols = [("cid", "CID"), ("name", "NAME"), ("role", "ROLE"), ("status", "STATUS"), ("resolved_model", "MODEL"),
            ("working_on", "WORKING ON")]
    out = table(m.items(), cols, width, m.selection(), colour)
    if m.detail is not None:
        out += [[]] + agent_detail(m, m.detail, width)
    else:
        out += [[], [("class:hint", "  Enter opens the agent's detail; t sends it a message.")]]
    return out


def agent_detail(m: Model, cid: Any, width: int) -> list[Line]:
    page = m.data.get(f"agent:{cid}")
    if not page:
        err = m.errors.get(f"agent:{cid}")
        return [[("", f"  agent {cid}: {err}" if err else f"  agent {cid}: loading ...")]]
    a = page.get("agent") or {}
    out: list[Line] = [[("class:header", _fit(f"  {a.get('name') or cid}  (cid {a.get('cid')}, {a.get('role')})", width))]]
    for k in ("status", "run", "resolved_model", "model_source", "permission_mode", "node", "queue", "working_on"):
        out.append([("class:label", f"    {k:<16}"), ("", _fit(_cell(a.get(k)), width - 20))])
    entries = (page.get("transcript") or [])[-DETAIL_ENTRIES:]
    out.append([("class:label", "    transcript")])
    if not entries:
        out.append([("", "      (nothing yet)")])
    for e in entries:
        out.append([("", _fit(f"      {_when(e.get('at'))[11:]}  {e.get('kind')}  {e.get('text') or e.get('tool') or ''}", width))])
    return out


def tasks(m: Model, width: int, colour: bool) -> list[Line]:
    cols = [("id", "TASK"), ("state", "STATE"), ("role", "ROLE"), ("budget", "BUDGET"), ("worker", "WORKER"),
            ("title", "TITLE")]
    return table(m.items(), cols, width, m.selection(), colour)


def approvals(m: Model, width: int, colour: bool) -> list[Line]:
    cols = [("id", "ID"), ("kind", "KIND"), ("agent", "AGENT"), ("requested_at", "ASKED"), ("title", "WHAT")]
    rows = [dict(r, requested_at=_when(r.get("requested_at"))) for r in m.items()]
    out = table(rows, cols, width, m.selection(), colour)
    return out + [[], [("class:hint", "  a approves, d denies the selected approval (each asks to confirm).")]]


def nodes(m: Model, width: int, colour: bool) -> list[Line]:
    rows = [dict(n, online=n.get("online"), cids=f"{n.get('cid_first')}-{n.get('cid_last')}",
                 machine=" ".join(str((n.get("facts") or {}).get(k) or "") for k in ("backend", "accel")).strip() or "-")
            for n in m.items()]
    cols = [("name", "NODE"), ("online", "ONLINE"), ("agents", "AGENTS"), ("cids", "CIDS"), ("machine", "MACHINE")]
    return table(rows, cols, width, m.selection(), colour)


def _opened(m: Model, resource: str, width: int) -> list[Line] | None:
    """An opened post or conversation still loading, or the hub's refusal of it; None once it is there."""
    if resource in m.data:
        return None
    err = m.errors.get(resource)
    return [[("class:error" if err else "", _fit(f"  {resource}: {err}" if err else f"  {resource}: loading ...", width))]]


def _wrapped(prefix: str, text: Any, width: int, lines: int = 4) -> list[Line]:
    clean = _fit(text, 100_000)
    out = textwrap.wrap(clean, max(width - len(prefix), 10))[:lines] or [""]
    return [[("", prefix + t)] for t in out]


def board(m: Model, width: int, colour: bool) -> list[Line]:
    b = m.data.get("board") or {}
    out: list[Line] = []
    if b.get("paused"):
        out.append([("class:banner", _fit(" PAUSED: deliveries are paused; posts are kept and their mentions wait.", width))])
    rows = [dict(p, at=_when(p.get("at")), replies=p.get("replies") or 0, held="held" if p.get("held") else "")
            for p in m.items()]
    cols = [("id", "POST"), ("author", "BY"), ("at", "WHEN"), ("replies", "REPLIES"), ("held", ""), ("text", "TEXT")]
    out += table(rows, cols, width, m.selection(), colour)
    post = m.opened.get("board")
    if post is None:
        return out + [[], [("class:hint", "  Enter opens a post's thread; t writes a post (as the owner).")]]
    out.append([])
    waiting = _opened(m, f"post:{post}", width)
    if waiting is not None:
        return out + waiting
    p = m.data[f"post:{post}"]
    out.append([("class:header", _fit(f"  {p.get('id')} by {p.get('author')}, {_when(p.get('at'))}", width))])
    out += _wrapped("    ", p.get("text"), width)
    for r in p.get("thread") or []:
        out.append([("class:label", _fit(f"    {r.get('post')}.r{r.get('reply')} {r.get('author')}, {_when(r.get('at'))}", width))])
        out += _wrapped("      ", r.get("text"), width, 2)
    if not p.get("thread"):
        out.append([("", "    (no replies yet)")])
    return out + [[("class:hint", "  t replies to this post; Enter closes it.")]]


def conversations(m: Model, width: int, colour: bool) -> list[Line]:
    rows = [dict(c, between=f"{c.get('a')} and {c.get('b')}", last_at=_when(c.get("last_at"))) for c in m.items()]
    cols = [("id", "THREAD"), ("messages", "MESSAGES"), ("last_at", "LAST"), ("last_text", "LATEST")]
    out = table(rows, cols, width, m.selection(), colour)
    cid = m.opened.get("conversations")
    if cid is None:
        return out + [[], [("class:hint", "  Enter opens a conversation; t writes to the agent of your own thread.")]]
    out.append([])
    waiting = _opened(m, f"conversation:{cid}", width)
    if waiting is not None:
        return out + waiting
    c = m.data[f"conversation:{cid}"]
    out.append([("class:header", _fit(f"  {c.get('id')}: {c.get('messages')} messages", width))])
    for msg in c.get("thread") or []:
        out.append([("class:label", _fit(f"    {msg.get('sender')} to {msg.get('to')}, {_when(msg.get('at'))}", width))])
        out += _wrapped("      ", msg.get("text"), width, 3)
    return out


def workspace(m: Model, width: int, height: int, colour: bool) -> list[Line]:
    items = m.items()
    sel = m.selection()
    out: list[Line] = [[("class:header", "  Agents, by role")]]
    if not items:
        out.append([("", "  (no agents yet)")])
    roles: dict[str, list[tuple[int, dict]]] = {}
    for i, a in enumerate(items):
        roles.setdefault(str(a.get("role")), []).append((i, a))
    for role, members in sorted(roles.items()):
        out.append([("class:label", f"  {role}")])
        for i, a in members:
            mark = ">" if i == sel else " "
            text = f"  {mark} └ {a.get('name') or a.get('cid')}  {a.get('status')}"
            out.append([("class:selected" if i == sel and colour else "", _fit(text, width))])
    chosen = m.chosen()
    if chosen is not None:
        out += [[]] + agent_detail(m, chosen.get("cid"), width)
        out.append([("class:hint", "  t writes to this agent (the composer).")])
    out += [[], [("", "  " + NOT_BUILT.format(title="The project board"))]]
    return out


def body(m: Model, width: int, height: int, colour: bool) -> list[Line]:
    t = m.current
    if not t.built:
        return [[("", "  " + NOT_BUILT.format(title=t.title))]]
    for r in t.resources:
        if r not in m.data and r in m.errors:
            return [[("class:error", _fit(f"  cannot load {r}: {m.errors[r]}", width))]]
    if t.name == "floor":
        return floor(m, width, height, colour)
    if t.name == "workspace":
        return workspace(m, width, height, colour)
    return {"overview": overview, "agents": agents, "tasks": tasks, "approvals": approvals,
            "nodes": nodes, "board": board, "conversations": conversations}[t.name](m, width, colour)


def status_line(m: Model, width: int, colour: bool) -> Line:
    if m.composer is not None:
        what = m.composer.prompt or f"message to {m.composer.name}"
        return [("class:prompt", _fit(f" {what} (Enter sends, Esc cancels): {m.composer.text}_", width))]
    if m.confirm is not None:
        return [("class:prompt", _fit(f" {m.confirm.question}", width))]
    keys = "0-8 tabs  j/k move  Enter detail  t message  a/d approve/deny  s STOP ALL  r refresh  q quit"
    live = f"[{m.live}]" + ("" if colour else " [no colours]")
    left = f" {m.note}" if m.note else f" {keys}"
    room = max(width - len(live) - 1, 0)
    return [("class:status", _fit(left, room).ljust(room)), ("class:live", " " + live)]


def too_small(width: int, height: int) -> list[Line]:
    """One message, wrapped to the terminal's width."""
    message = (f"The terminal is too small for agentplaza tui: {width}x{height}; it needs at least "
               f"{MIN_WIDTH}x{MIN_HEIGHT}. Make the window larger (q quits).")
    return [[("", line)] for line in textwrap.wrap(message, max(width, 1))[: max(height, 1)]]


def screen(m: Model, width: int, height: int, colour: bool = True) -> list[Line]:
    """The whole screen, ``height`` lines at most."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        return too_small(width, height)
    top = [tab_bar(m, width, colour), *banner(m, width), []]
    bottom = [status_line(m, width, colour)]
    room = height - len(top) - len(bottom)
    lines = body(m, width, room, colour)
    if len(lines) > room:
        lines = lines[: room - 1] + [[("class:hint", "  ... (more below; the terminal is too short to show it all)")]]
    lines += [[] for _ in range(room - len(lines))]
    if not colour:
        top = [[("", t) for _, t in line] for line in top]
        lines = [[("", t) for _, t in line] for line in lines]
        bottom = [[("", t) for _, t in line] for line in bottom]
    return top + lines + bottom


def text(lines: list[Line]) -> str:
    """The screen as plain text, one line each."""
    return "\n".join("".join(t for _, t in line).rstrip() for line in lines)
