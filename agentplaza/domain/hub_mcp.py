"""The hub as an MCP server: its switches, the tokens the owner issues, and the call log.

``HubMcp`` is one record: whether ``/mcp`` answers, local or remote, secure or open (and the open
scope), and the browser origins the owner added.  ``McpToken`` is one
token: its name, its one scope, an optional tool allowlist (tool names and ``acp:<agent>``
entries), an optional expiry, and the SHA-256 of its value (the value itself is shown once and
kept nowhere).  ``McpCall`` is one line of the append-only call log: who (a token, or an
address in open mode), the tool, a digest of the arguments (never the arguments), the outcome and
how long it took.  ``McpRecommendation`` is a govern token's advice on a pending approval: it
decides nothing.

Rules:

1. Remote needs the hub to serve HTTPS; until it does, ``enable --remote`` is refused.
2. A token's scope is one of ``MCP_SCOPES``; its allowlist names only tools of that scope (or
   ``acp:`` entries); its name is 1..``MAX_TOKEN_NAME`` characters; an expiry lies in the future.
3. A token is revoked once; a revoked token never comes back.
4. An origin the owner adds is ``http(s)://host[:port]``, at most ``MAX_ORIGINS`` of them.
"""

from __future__ import annotations

import datetime as dt
import re
from urllib.parse import urlsplit

from ..wire import ACP_ENTRY_PREFIX, MCP_MODES, MCP_SCOPES
from .base import Context, PlazaAggregate, Refusal, fixed_id

HUB_MCP_ID = fixed_id("hub-mcp")
MAX_TOKEN_NAME = 100
#: The most entries in one token's allowlist.
MAX_ALLOWLIST = 64
#: The most browser origins the owner may add.
MAX_ORIGINS = 32
MAX_ORIGIN_CHARS = 200
#: A recommendation's note.
MAX_NOTE_CHARS = 2000
TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
ACP_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
VERDICTS = ("approve", "deny")


def check_scope(scope: str) -> str:
    if scope not in MCP_SCOPES:
        raise Refusal("invalid_scope", f"a token's scope is one of {', '.join(MCP_SCOPES)}")
    return scope


def scope_includes(held: str, needed: str) -> bool:
    """observe ⊂ operate ⊂ govern."""
    return MCP_SCOPES.index(held) >= MCP_SCOPES.index(needed)


def check_allowlist(entries: list[str], scope: str, scope_of_tool: dict[str, str]) -> list[str]:
    """The allowlist as given, each entry a tool of the token's scope or an ``acp:<agent>``."""
    if len(entries) > MAX_ALLOWLIST:
        raise Refusal("invalid_request", f"a token's allowlist holds at most {MAX_ALLOWLIST} entries")
    out: list[str] = []
    for e in entries:
        if e.startswith(ACP_ENTRY_PREFIX):
            if not ACP_AGENT.fullmatch(e[len(ACP_ENTRY_PREFIX):]):
                raise Refusal("invalid_request", f"{e[:80]!r}: an acp entry is acp:<agent name or CID>")
        elif e not in scope_of_tool:
            raise Refusal("unknown_tool", f"{e[:80]!r} is not a tool of this hub's MCP server")
        elif not scope_includes(scope, scope_of_tool[e]):
            raise Refusal("invalid_scope", f"{e} needs the {scope_of_tool[e]} scope; this token is {scope}")
        if e not in out:
            out.append(e)
    return out


def check_origin(origin: str) -> str:
    parts = urlsplit(origin)
    if (len(origin) > MAX_ORIGIN_CHARS or parts.scheme not in ("http", "https") or not parts.hostname
            or parts.path not in ("", "/") or parts.query or parts.fragment or parts.username):
        raise Refusal("invalid_request", f"an origin is http(s)://host[:port], not {origin[:80]!r}")
    return f"{parts.scheme}://{parts.netloc.lower()}"


class HubMcp(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        pass

    class Switched(PlazaAggregate.Event):
        enabled: bool
        remote: bool

        def apply(self, m: HubMcp) -> None:
            m.enabled, m.remote = self.enabled, self.remote

    class ModeSet(PlazaAggregate.Event):
        mode: str
        open_scope: str

        def apply(self, m: HubMcp) -> None:
            m.mode, m.open_scope = self.mode, self.open_scope

    class OriginsSet(PlazaAggregate.Event):
        origins: list[str]

        def apply(self, m: HubMcp) -> None:
            m.origins = list(self.origins)

    class AcpSet(PlazaAggregate.Event):
        """The Editors (ACP) switches: the link itself, write-back, and the ACP v2 draft."""

        acp_enabled: bool
        acp_write_back: bool
        acp_v2: bool

        def apply(self, m: HubMcp) -> None:
            m.acp_enabled, m.acp_write_back, m.acp_v2 = self.acp_enabled, self.acp_write_back, self.acp_v2

    def __init__(self) -> None:
        self.enabled = self.remote = False
        self.mode, self.open_scope = "secure", "observe"
        self.origins: list[str] = []
        self.acp_enabled = self.acp_write_back = self.acp_v2 = False

    @classmethod
    def open(cls, ctx: Context) -> HubMcp:
        return cls.start(ctx, id=HUB_MCP_ID)

    def switch(self, ctx: Context, enabled: bool, remote: bool, serves_https: bool) -> None:
        if enabled and remote and not serves_https:
            raise Refusal("remote_needs_https", "--remote needs the hub to serve HTTPS, and this hub serves plain "
                                                "HTTP; the server stays local (enable it without --remote)")
        if (enabled, remote and enabled) == (self.enabled, self.remote):
            raise Refusal("no_change", "the MCP server is already " + describe(enabled, remote and enabled))
        self.record(self.Switched, ctx, enabled=enabled, remote=remote and enabled)

    def set_mode(self, ctx: Context, mode: str, open_scope: str) -> None:
        if mode not in MCP_MODES:
            raise Refusal("invalid_mode", f"the MCP mode is one of {', '.join(MCP_MODES)}")
        check_scope(open_scope)
        if (mode, open_scope) == (self.mode, self.open_scope):
            raise Refusal("no_change", f"the MCP server is already {mode} at {open_scope}")
        self.record(self.ModeSet, ctx, mode=mode, open_scope=open_scope)

    def set_origins(self, ctx: Context, origins: list[str]) -> None:
        if len(origins) > MAX_ORIGINS:
            raise Refusal("invalid_request", f"at most {MAX_ORIGINS} origins")
        clean = list(dict.fromkeys(check_origin(o) for o in origins))
        if clean == self.origins:
            raise Refusal("no_change", "those are the origins already allowed")
        self.record(self.OriginsSet, ctx, origins=clean)


    def set_acp(self, ctx: Context, acp_enabled: bool | None, acp_write_back: bool | None, acp_v2: bool | None) -> None:
        """Any of the three switches; the others stay as they are."""
        new = tuple(old if v is None else bool(v) for old, v in (
            (self.acp_enabled, acp_enabled), (self.acp_write_back, acp_write_back), (self.acp_v2, acp_v2)))
        if new == (self.acp_enabled, self.acp_write_back, self.acp_v2):
            raise Refusal("no_change", "the Editors (ACP) switches are already so")
        self.record(self.AcpSet, ctx, acp_enabled=new[0], acp_write_back=new[1], acp_v2=new[2])


def describe(enabled: bool, remote: bool) -> str:
    return "off" if not enabled else ("on, remote" if remote else "on, local")


class McpToken(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        name: str
        scope: str
        tools: list[str]
        expires_at: str | None
        sha256: str

    class Revoked(PlazaAggregate.Event):
        def apply(self, t: McpToken) -> None:
            t.revoked = True

    def __init__(self, name: str, scope: str, tools: list[str], expires_at: str | None, sha256: str) -> None:
        self.name, self.scope, self.tools, self.expires_at, self.sha256 = name, scope, tools, expires_at, sha256
        self.revoked = False

    @classmethod
    def issue(cls, ctx: Context, token_id, name: str, scope: str, tools: list[str], expires_at: dt.datetime | None,
              sha256: str, scope_of_tool: dict[str, str]) -> McpToken:
        name = name.strip()
        if not name or len(name) > MAX_TOKEN_NAME or any(ord(c) < 32 for c in name):
            raise Refusal("invalid_name", f"a token's name is 1 to {MAX_TOKEN_NAME} printable characters")
        check_scope(scope)
        allow = check_allowlist(tools, scope, scope_of_tool)
        if expires_at is not None and expires_at <= ctx.at:
            raise Refusal("invalid_request", "a token's expiry lies in the future")
        return cls.start(ctx, id=token_id, name=name, scope=scope, tools=allow,
                         expires_at=expires_at.isoformat() if expires_at else None, sha256=sha256)

    def revoke(self, ctx: Context) -> None:
        if self.revoked:
            raise Refusal("token_revoked", f"the token {self.name!r} is already revoked")
        self.record(self.Revoked, ctx)


class McpCall(PlazaAggregate):
    """One line of the call log (its Created event is the whole record)."""

    class Created(PlazaAggregate.Created):
        caller: str  # "token:<id>", "owner", or "address:<ip>" (open mode)
        via: str  # "mcp" or "acp"
        tool: str  # a tool's name, or acp/<method>
        digest: str  # sha256 of the canonical arguments
        outcome: str  # ok, refused, error
        code: str | None
        ms: int

    def __init__(self, caller: str, via: str, tool: str, digest: str, outcome: str, code: str | None, ms: int):
        self.caller, self.via, self.tool, self.digest, self.outcome, self.code, self.ms = (
            caller, via, tool, digest, outcome, code, ms)


class McpRecommendation(PlazaAggregate):
    """A govern caller's recommendation on a pending approval; the owner still decides."""

    class Created(PlazaAggregate.Created):
        approval: str
        verdict: str
        note: str
        caller: str

    def __init__(self, approval: str, verdict: str, note: str, caller: str) -> None:
        self.approval, self.verdict, self.note, self.caller = approval, verdict, note, caller

    @classmethod
    def make(cls, ctx: Context, rec_id, approval: str, status: str, verdict: str, note: str,
             caller: str) -> McpRecommendation:
        if verdict not in VERDICTS:
            raise Refusal("invalid_request", "a recommendation is approve or deny")
        if len(note) > MAX_NOTE_CHARS:
            raise Refusal("invalid_request", f"a recommendation's note is at most {MAX_NOTE_CHARS} characters")
        if status != "pending":
            raise Refusal("approval_decided", f"approval {approval} is already {status}")
        return cls.start(ctx, id=rec_id, approval=approval, verdict=verdict, note=note, caller=caller)


#: ``--expires 30d``: a whole number of days, hours or minutes, up to a year.
EXPIRY = re.compile(r"([1-9][0-9]{0,5})([dhm])")
EXPIRY_UNITS = {"d": dt.timedelta(days=1), "h": dt.timedelta(hours=1), "m": dt.timedelta(minutes=1)}
MAX_EXPIRY = dt.timedelta(days=366)


def parse_expiry(text: str) -> dt.timedelta:
    m = EXPIRY.fullmatch(text.strip())
    if m is None:
        raise Refusal("invalid_request", f"an expiry is a number and d, h or m (30d, 12h, 90m), not {text[:40]!r}")
    span = int(m.group(1)) * EXPIRY_UNITS[m.group(2)]
    if span > MAX_EXPIRY:
        raise Refusal("invalid_request", "a token expires within a year")
    return span
