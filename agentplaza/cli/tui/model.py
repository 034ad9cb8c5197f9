"""The terminal screen's state and what each key and each live event does to it. Pure: no I/O.

The screen (``tui/app.py``) feeds keys and bus messages in; each returns the effects to carry out
(``Load`` what the hub answers, ``Send`` a change, ``Quit``), and the screen carries them out and
stores the answers back with ``loaded``/``failed``. What is drawn is ``tui/views.py``'s, from this
state alone, so a test can drive the whole screen here without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Tab:
    name: str
    title: str
    key: str
    resources: tuple[str, ...]  # what the tab reads from the hub
    built: bool = True


#: The tabs, in the guide's order: Floor (1) ... Nodes (8), then the Workspace (key 0).
TABS = (
    Tab("floor", "Floor", "1", ("agents",)),
    Tab("overview", "Overview", "2", ("overview",)),
    Tab("agents", "Agents", "3", ("agents",)),
    Tab("tasks", "Tasks", "4", ("tasks",)),
    Tab("approvals", "Approvals", "5", ("approvals",)),
    Tab("board", "Board", "6", ("board",)),
    Tab("conversations", "Conversations", "7", ("conversations",)),
    Tab("nodes", "Nodes", "8", ("nodes",)),
    Tab("workspace", "Workspace", "0", ("agents",)),
)
TAB_BY_KEY = {t.key: i for i, t in enumerate(TABS)}
#: The most board posts and conversations the tabs read.
LIST_LIMIT = 100
#: The hub route behind each resource ("agent:CID" is one agent's page, "post:pN" one post with its
#: thread, "conversation:ID" one conversation's messages).
ROUTES = {
    "plaza": "/v1/plaza", "overview": "/v1/overview", "agents": "/v1/agents", "tasks": "/v1/tasks",
    "approvals": "/v1/approvals?pending=true", "nodes": "/v1/nodes",
    "board": f"/v1/board?limit={LIST_LIMIT}", "conversations": f"/v1/conversations?limit={LIST_LIMIT}",
}
#: The resource of one opened row on the tabs that open one (Enter), by tab.
OPENED_RESOURCE = {"board": "post:{}", "conversations": "conversation:{}"}
#: The resources a live event of each family makes stale (any other family: the overview's counts).
STALE_BY_FAMILY = {
    "plaza": ("plaza", "overview"), "agent": ("agents", "overview", "nodes"), "node": ("nodes", "agents"),
    "tasks": ("tasks", "overview"), "workers": ("tasks",), "sequences": ("tasks", "approvals"),
    "approvals": ("approvals", "overview"), "board": ("board",), "conversation": ("conversations",),
}
#: The families whose events an opened post or conversation follows (the owner's messages are Agent.Told).
OPENED_FAMILIES = {"post:": ("board",), "conversation:": ("conversation", "agent")}
#: The one line a tab whose area is not built yet shows.
NOT_BUILT = "{title}: this area is not built on this hub yet; the tab fills in when it lands."
#: The reasons the screen's changes carry (the log's account of who did what).
STOP_REASON = "STOP ALL from the terminal screen"
#: The longest message the composer takes.
MAX_MESSAGE_CHARS = 4000


@dataclass(frozen=True)
class Load:
    resources: tuple[str, ...]


@dataclass(frozen=True)
class Send:
    method: str
    path: str
    body: dict
    done: str  # the note shown when the hub says yes
    reload: tuple[str, ...] = ()
    answer_is: str = ""  # the resource the hub's answer is the new state of, shown with the note


@dataclass(frozen=True)
class Quit:
    pass


Effect = Load | Send | Quit


@dataclass
class Confirm:
    question: str
    effect: Send


@dataclass
class Composer:
    cid: Any
    name: str
    text: str = ""
    path: str = ""  # where Enter sends the text; empty: the agent's message route
    prompt: str = ""  # what the status line says it writes; empty: "message to NAME"
    done: str = ""
    reload: tuple[str, ...] = ()


@dataclass
class Model:
    tab: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    selected: dict[str, int] = field(default_factory=dict)
    detail: Any = None  # the cid whose detail is open on the Agents tab
    opened: dict[str, str] = field(default_factory=dict)  # tab -> the post or conversation open on it
    confirm: Confirm | None = None
    composer: Composer | None = None
    note: str = ""
    live: str = "connecting"
    quit: bool = False

    @property
    def current(self) -> Tab:
        return TABS[self.tab]

    # -- what the hub said ------------------------------------------------------------------

    def loaded(self, resource: str, answer: Any) -> None:
        self.data[resource] = answer
        self.errors.pop(resource, None)
        self.stale.discard(resource)
        self._clamp()

    def failed(self, resource: str, message: str) -> None:
        self.errors[resource] = message

    @property
    def plaza(self) -> dict:
        return self.data.get("plaza") or {}

    @property
    def held(self) -> bool:
        return bool(self.plaza.get("held"))

    # -- the lists a tab moves through ------------------------------------------------------

    def items(self, tab: Tab | None = None) -> list[dict]:
        t = tab or self.current
        if t.name in ("floor", "agents", "workspace"):
            return list((self.data.get("agents") or {}).get("agents") or [])
        if t.name == "tasks":
            return list((self.data.get("tasks") or {}).get("tasks") or [])
        if t.name == "approvals":
            return [a for a in (self.data.get("approvals") or {}).get("approvals") or [] if a.get("status") == "pending"]
        if t.name == "nodes":
            return list((self.data.get("nodes") or {}).get("nodes") or [])
        if t.name == "board":
            return list((self.data.get("board") or {}).get("posts") or [])
        if t.name == "conversations":
            return list((self.data.get("conversations") or {}).get("conversations") or [])
        return []

    def selection(self, tab: Tab | None = None) -> int:
        t = tab or self.current
        return self.selected.get(t.name, 0)

    def chosen(self) -> dict | None:
        items = self.items()
        i = self.selection()
        return items[i] if 0 <= i < len(items) else None

    def _clamp(self) -> None:
        for t in TABS:
            n = len(self.items(t))
            if t.name in self.selected:
                self.selected[t.name] = max(0, min(self.selected[t.name], n - 1))

    def needs(self) -> tuple[str, ...]:
        """What the current tab draws from: its resources, the plaza (the banner), an open detail."""
        out = ["plaza", *self.current.resources]
        if self.current.name in ("agents", "workspace"):
            cid = self.detail if self.current.name == "agents" else (self.chosen() or {}).get("cid")
            if cid is not None:
                out.append(f"agent:{cid}")
        if self.current.name in self.opened:
            out.append(OPENED_RESOURCE[self.current.name].format(self.opened[self.current.name]))
        return tuple(dict.fromkeys(out))


def route_of(resource: str) -> str:
    kind, _, key = resource.partition(":")
    if kind == "agent":
        return f"/v1/agents/{key}"
    if kind == "post":
        return f"/v1/board/{quote(key, safe='')}"
    if kind == "conversation":
        return f"/v1/conversations/{quote(key, safe='')}"
    return ROUTES[resource]


# -- keys ------------------------------------------------------------------------------------


def _go(m: Model, index: int) -> list[Effect]:
    m.tab = index % len(TABS)
    m.note = ""
    return [Load(m.needs())]


def _move(m: Model, by: int) -> list[Effect]:
    n = len(m.items())
    if n == 0:
        return []
    name = m.current.name
    m.selected[name] = max(0, min(m.selection() + by, n - 1))
    if name == "workspace":
        return [Load(m.needs())]
    return []


def _compose(m: Model, key: str, text: str) -> list[Effect]:
    c = m.composer
    assert c is not None
    if key == "escape":
        m.composer, m.note = None, "message not sent"
        return []
    if key == "enter":
        m.composer = None
        if not c.text.strip():
            m.note = "an empty message is not sent"
            return []
        if c.path:
            return [Send("POST", c.path, {"text": c.text}, c.done, c.reload)]
        return [Send("POST", f"/v1/agents/{c.cid}/tell", {"text": c.text}, f"message sent to {c.name}",
                     ("agents", f"agent:{c.cid}"))]
    if key == "backspace":
        c.text = c.text[:-1]
    elif text and text.isprintable() and len(c.text) + len(text) <= MAX_MESSAGE_CHARS:
        c.text += text
    return []


def _answer(m: Model, key: str) -> list[Effect]:
    confirm = m.confirm
    assert confirm is not None
    m.confirm = None
    if key in ("y", "Y", "enter"):
        m.note = "asking the hub ..."
        return [confirm.effect]
    m.note = "not confirmed; nothing changed"
    return []


def _ask(m: Model, question: str, effect: Send) -> list[Effect]:
    m.confirm = Confirm(question, effect)
    return []


def _decide(m: Model, approve: bool) -> list[Effect]:
    a = m.chosen()
    if a is None:
        m.note = "no pending approval is selected"
        return []
    word = "approve" if approve else "deny"
    return _ask(m, f"{word.capitalize()} {a['id']} ({a.get('title') or a.get('kind')})? y/n",
                Send("POST", f"/v1/approvals/{a['id']}/{word}", {}, f"{a['id']} {'approved' if approve else 'denied'}", ("approvals", "overview")))


def _stop_or_resume(m: Model) -> list[Effect]:
    if m.held:
        return _ask(m, "Resume the plaza? Agents think again. y/n",
                    Send("POST", "/v1/plaza/resume", {}, "the plaza is running again", ("overview",), "plaza"))
    return _ask(m, "STOP ALL holds the whole plaza: every agent stops thinking. Continue? y/n",
                Send("POST", "/v1/plaza/stop", {"reason": STOP_REASON}, "the plaza is held (STOP ALL)",
                     ("overview",), "plaza"))


def _open(m: Model, tab: str) -> list[Effect]:
    """Enter on the Board or Conversations tab: open the selected post's thread or conversation, or close it."""
    row = m.chosen()
    if row is None:
        return []
    rid = str(row.get("id"))
    if m.opened.get(tab) == rid:
        del m.opened[tab]
        return []
    m.opened[tab] = rid
    return [Load(m.needs())]


def _write_on_board(m: Model) -> list[Effect]:
    """``t`` on the Board: a reply to the open post, else a new post as the owner."""
    post = m.opened.get("board")
    if post is not None:
        m.composer = Composer(None, post, path=f"/v1/board/{quote(post, safe='')}/replies", prompt=f"reply to {post}",
                              done=f"replied to {post}", reload=("board", f"post:{post}"))
    else:
        m.composer = Composer(None, "the board", path="/v1/board", prompt="post to the board", done="posted",
                              reload=("board",))
    return []


def _write_in_conversation(m: Model) -> list[Effect]:
    """``t`` on Conversations: a message to the agent of the selected owner~CID thread (an agents' thread is
    theirs: the owner reads it)."""
    row = m.chosen()
    if row is None:
        m.note = "no conversation is selected"
        return []
    if row.get("a") != "owner":
        m.note = f"{row.get('id')} is between agents: you read it; t writes in your own threads"
        return []
    cid = row.get("b")
    m.composer = Composer(cid, str(cid), path=f"/v1/agents/{cid}/tell", done=f"message sent to {cid}",
                          reload=("conversations", f"conversation:{row.get('id')}"))
    return []


def key(m: Model, name: str, text: str = "") -> list[Effect]:
    """One key: ``name`` is the key ("j", "tab", "s-tab", "up", "enter", "escape", "backspace" ...),
    ``text`` what it types (for the composer)."""
    if name == "c-c":
        m.quit = True
        return [Quit()]
    if m.composer is not None:
        return _compose(m, name, text)
    if m.confirm is not None:
        return _answer(m, name)
    tab = m.current.name
    if name in TAB_BY_KEY:
        return _go(m, TAB_BY_KEY[name])
    if name == "tab":
        return _go(m, m.tab + 1)
    if name == "s-tab":
        return _go(m, m.tab - 1)
    if name in ("j", "down"):
        return _move(m, 1)
    if name in ("k", "up"):
        return _move(m, -1)
    if name in ("q", "escape"):
        m.quit = True
        return [Quit()]
    if name == "r":
        m.note = "refreshed"
        return [Load(m.needs())]
    if name == "s":
        return _stop_or_resume(m)
    if name == "enter" and tab in OPENED_RESOURCE:
        return _open(m, tab)
    if name == "t" and tab == "board":
        return _write_on_board(m)
    if name == "t" and tab == "conversations":
        return _write_in_conversation(m)
    if name == "enter" and tab == "agents":
        a = m.chosen()
        if a is None:
            return []
        m.detail = None if m.detail == a["cid"] else a["cid"]
        return [Load(m.needs())]
    if name == "t" and tab in ("agents", "workspace"):
        a = m.chosen()
        if a is None:
            m.note = "no agent is selected"
            return []
        m.composer = Composer(a["cid"], a.get("name") or str(a["cid"]))
        return []
    if name in ("a", "d") and tab == "approvals":
        return _decide(m, name == "a")
    if name == "w":
        m.note = "Workstations: this area is not built on this hub yet."
        return []
    if name == "T":
        m.note = "Taking over a workstation: workstations are not built on this hub yet."
        return []
    return []


# -- what the hub says, and the bus ------------------------------------------------------------


def sent(m: Model, effect: Send, answer: Any = None) -> list[Effect]:
    """The hub said yes to ``effect``: its note, and where the answer is a resource's new state (STOP ALL and
    resume answer the plaza's), that state in the same frame, so the banner never contradicts the note."""
    m.note = effect.done
    if effect.answer_is and isinstance(answer, dict):
        m.loaded(effect.answer_is, answer)
    again = ("plaza", *effect.reload, *m.needs())
    return [Load(tuple(r for r in dict.fromkeys(again) if r != effect.answer_is))]


def refused(m: Model, effect: Send, message: str) -> None:
    m.note = f"the hub refused: {message}"


def event(m: Model, message: dict) -> list[Effect]:
    """A live event: what it makes stale is reloaded now if this tab draws it, else when the tab opens."""
    family = str(message.get("event") or "")
    stale = set(STALE_BY_FAMILY.get(family, ("overview",)))
    if family in ("agent", "conduct"):  # an open agent page follows its agent
        stale |= {r for r in m.needs() if r.startswith("agent:")}
    if family == "agent":  # the owner's messages to agents are their conversations
        stale.add("conversations")
    for prefix, families in OPENED_FAMILIES.items():
        if family in families:
            stale |= {r for r in m.needs() if r.startswith(prefix)}
    m.stale |= stale
    now = tuple(r for r in m.needs() if r in m.stale)
    return [Load(now)] if now else []
