"""The ACP methods the hub answers for an editor (``acp_door``): initialize, session/new, session/load,
session/resume, session/prompt, session/cancel, session/set_mode and session/set_model, and the
permission requests it sends for the approvals an agent waits on.

A prompt is a work item told to the agent (one commit with the session's record of it); the agent's
harness does the work, and the hub streams the agent's transcript back as it grows: its replies as
message chunks, each tool call with its status (pending while it waits on an approval, in progress,
completed or failed), the plan, then the prompt's stop reason when the item ends.  An approval the
agent waits on is asked of a govern caller (the owner's answer, recorded as coming over ACP); an
operate caller sees it pending and is never asked.  With the repository mirror (``agentplaza acp
--repo``), a pull request the agent opens into the editor's branch is shown as a tool call of diffs,
and with ``acp_write_back`` a govern editor that can write files is asked to apply it: the only time
the hub calls an editor's file method (``fs/write_text_file``).  It never calls the terminal methods
and never connects the editor's MCP servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from acp import helpers as h
from acp import schema as s
from pydantic import ValidationError

from vmm.guest.contract import GIT_PORT

from ..commands import acp as commands
from ..commands import agents as agent_commands
from ..commands import approvals as approval_commands
from ..domain.acp import (
    MAX_WRITE_BACK_FILES,
    SLASH_COMMANDS,
    WRITE_BACK_WAIT_S,
    Mirror,
    mirror_note,
    mirror_of,
    project_path,
    prompt_text,
    slash_command,
)
from ..domain.base import Refusal
from ..projections import agents as agents_rm
from ..projections import git as git_rm
from ..projections import hub_mcp as rm
from ..runtime import forge
from ..wire import ACP_MODES
from .acp_door import BadParams, MethodNotFound
from .hub import VERSION

if TYPE_CHECKING:
    from .acp_door import Connection

#: ACP v1, and the v2 draft when the owner turns on acp_v2 and the editor asks for it.
PROTOCOL_V1, PROTOCOL_V2 = 1, 2
#: How often a running prompt looks for new transcript entries.
FOLLOW_POLL_S = 0.1
#: How much of a tool's result the editor is shown.
RESULT_SHOWN = 2000
MODE_NAMES = {"autonomous": "Autonomous", "ask": "Ask", "read_only": "Read only"}



@dataclass
class Open:
    """A session this connection opened (new, loaded or resumed)."""

    id: str
    cid: int
    running: str | None = None  # the work item of the prompt in progress
    cancelled: bool = False
    writing: bool = False  # a prompt is being written: a cancel now applies to it once it is
    asked: set[str] = field(default_factory=set)  # approvals already put to the editor
    cwd: str | None = None  # the editor's project folder (session/new, load, resume)
    mirror: Mirror | None = None  # what the CLI last pushed of it (``agentplaza acp --repo``)
    shown_prs: set[str] = field(default_factory=set)  # the mirror's pull requests already shown


def _parse(model, params: dict):
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise BadParams(f"{model.__name__}: {e.errors()[0].get('msg', 'invalid')} at "
                        f"{'.'.join(str(x) for x in e.errors()[0].get('loc', ()))}") from None


def _out(model) -> dict:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def _q(fn, *args):
    return await anyio.to_thread.run_sync(lambda: fn(*args))


async def _settled(c: Connection, done) -> None:
    if done.positions and c.door.mcp.settle is not None:
        await c.door.mcp.settle(done.positions[-1])


def _ctx(c: Connection, why: str):
    return c.hub.commands.context("owner", f"over ACP: {why}", f"acp:{c.caller.key}")


async def dispatch(c: Connection, method: str, params: dict) -> Any:
    if method != "initialize" and c.protocol is None:
        raise Refusal("invalid_request", "initialize first")
    fn = METHODS.get(method)
    v2_gone = c.protocol == PROTOCOL_V2 and method in ("session/load", "session/set_mode")
    if fn is None or v2_gone:
        raise MethodNotFound(f"method not found: {method}")
    return await fn(c, params)


# -- initialize and the sessions --------------------------------------------------------------------------

async def initialize(c: Connection, params: dict) -> dict:
    req = _parse(s.InitializeRequest, params)
    settings = await _q(rm.settings, c.hub.read_models)
    c.protocol = PROTOCOL_V2 if req.protocol_version == PROTOCOL_V2 and settings["acp_v2"] else PROTOCOL_V1
    c.client_caps = _out(req.client_capabilities) if req.client_capabilities else {}
    caps = s.AgentCapabilities(
        load_session=c.protocol == PROTOCOL_V1,
        prompt_capabilities=s.PromptCapabilities(image=False, audio=False, embedded_context=True),
        mcp_capabilities=s.McpCapabilities(http=False, sse=False),
        session_capabilities=s.SessionCapabilities(resume=s.SessionResumeCapabilities()))
    return _out(s.InitializeResponse(protocol_version=c.protocol, agent_capabilities=caps, auth_methods=[],
                                     agent_info=s.Implementation(name="agentplaza", version=VERSION)))


def _pick_agent(c: Connection) -> dict:
    rows = agents_rm.roster(c.hub.read_models)
    live = [a for a in rows if a.get("status") != "retired"]
    word = c.agent_word
    if word is None:
        found = [a for a in live if a.get("role") == "orchestrator"]
        if not found:
            raise Refusal("no_orchestrator", "this plaza has no orchestrator; pass --agent NAME|CID")
    else:
        found = [a for a in live if str(a["cid"]) == word or (a.get("name") or "") == word]
        if not found:
            raise Refusal("unknown_agent", f"no agent {word[:100]!r} on this plaza")
    agent = found[0]
    _may_drive(c, agent)
    return agent


def _may_drive(c: Connection, agent: dict) -> None:
    if c.caller.acp and str(agent["cid"]) not in c.caller.acp and (agent.get("name") or "") not in c.caller.acp:
        raise Refusal("not_allowed", f"this token's acp: entries do not name agent {agent.get('name') or agent['cid']}")


def _modes(c: Connection, agent: dict) -> s.SessionModeState | None:
    if c.protocol == PROTOCOL_V2:
        return None  # v2 has no session/set_mode: the session keeps the mode the owner set
    current = next((k for k, v in ACP_MODES.items() if v == agent.get("permission_mode")), "autonomous")
    return s.SessionModeState(current_mode_id=current, available_modes=[
        s.SessionMode(id=k, name=MODE_NAMES[k]) for k in ACP_MODES])


async def _announce(c: Connection, session_id: str) -> None:
    cmds = [s.AvailableCommand(name=n, description=d, input=s.AvailableCommandInput(
        root=s.UnstructuredCommandInput(hint=hint)) if hint else None) for n, d, hint in SLASH_COMMANDS]
    await _update(c, session_id, h.update_available_commands(cmds))


async def _update(c: Connection, session_id: str, update) -> None:
    await c.notify("session/update", _out(h.session_notification(session_id, update)))


async def session_new(c: Connection, params: dict) -> dict:
    req = _parse(s.NewSessionRequest, params)
    mirror = mirror_of(params.get("_meta"))  # checked before anything is recorded
    agent = await _q(_pick_agent, c)
    done = await _q(commands.new_session, c.hub.commands, _ctx(c, "new session"), agent["cid"], c.caller.key,
                    c.protocol, req.cwd)
    await _settled(c, done)
    c.sessions[done.value] = Open(done.value, agent["cid"], cwd=req.cwd, mirror=mirror)
    c.tg.start_soon(_announce, c, done.value)
    return _out(s.NewSessionResponse(session_id=done.value, modes=_modes(c, agent)))


async def _reopen(c: Connection, session_id: str, how: str, params: dict) -> dict:
    mirror = mirror_of(params.get("_meta"))
    row = await _q(rm.acp_session, c.hub.read_models, session_id)
    if row is None:
        raise Refusal("no_session", f"no editor session {session_id[:40]!r} on this hub")
    agent = await _q(agents_rm.agent_of, c.hub.read_models, row["cid"])
    _may_drive(c, agent)
    done = await _q(commands.reopen, c.hub.commands, _ctx(c, f"session {how}"), row["id"], how, c.caller.key)
    await _settled(c, done)
    cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
    c.sessions[row["id"]] = Open(row["id"], row["cid"], cwd=cwd, mirror=mirror)
    return agent


async def session_load(c: Connection, params: dict) -> dict:
    req = _parse(s.LoadSessionRequest, params)
    agent = await _reopen(c, req.session_id, "load", params)
    for update in await _q(_history, c, req.session_id, agent["cid"]):
        await _update(c, req.session_id, update)
    c.tg.start_soon(_announce, c, req.session_id)
    return _out(s.LoadSessionResponse(modes=_modes(c, agent)))


async def session_resume(c: Connection, params: dict) -> dict:
    req = _parse(s.ResumeSessionRequest, params)
    agent = await _reopen(c, req.session_id, "resume", params)
    c.tg.start_soon(_announce, c, req.session_id)
    return _out(s.ResumeSessionResponse(modes=_modes(c, agent)))


def _history(c: Connection, session_id: str, cid: int) -> list:
    """The session replayed: each prompt, and the agent's replies to it."""
    c.hub.read_models.catch_up()
    items = set((rm.acp_session(c.hub.read_models, session_id) or {}).get("items") or [])
    out, mine = [], False
    for e in _all_entries(c, cid):
        item = (e["detail"] or {}).get("item")
        if e["kind"] == "told":
            mine = item in items
            if mine:
                out.append(h.update_user_message_text(e["text"] or ""))
        elif mine and e["kind"] == "model" and e["text"]:
            out.append(h.update_agent_message_text(e["text"]))
        elif e["kind"] == "done" and item in items:
            mine = False
    return out


def _all_entries(c: Connection, cid: int, after: int = 0) -> list[dict]:
    out = []
    while True:
        page = agents_rm.transcript(c.hub.read_models, cid, after=after, limit=500)
        out += page
        if len(page) < 500:
            return out
        after = page[-1]["seq"]


# -- prompts ----------------------------------------------------------------------------------------------

def _opened(c: Connection, session_id: str) -> Open:
    o = c.sessions.get(session_id)
    if o is None:
        raise Refusal("no_session", f"session {session_id[:40]!r} is not open here: new, load or resume it first")
    return o


async def session_prompt(c: Connection, params: dict) -> dict:
    req = _parse(s.PromptRequest, params)
    o = _opened(c, req.session_id)
    blocks = [_out(b) for b in req.prompt]
    text, _left = prompt_text(blocks)
    slash = slash_command(text)
    if slash is not None:
        return await _slash(c, o, slash)
    if o.running is not None:
        raise Refusal("agent_busy", "a prompt of this session is still running; cancel it or wait")
    o.mirror = mirror_of(params.get("_meta")) or o.mirror
    if o.mirror is not None:  # where the editor's project is (the CLI pushed it just now)
        text += mirror_note(o.mirror, o.id, f"http://127.0.0.1:{GIT_PORT}/git/{o.mirror.repo}.git")
    last = await _q(_last_seq, c, o.cid)
    o.cancelled, o.writing = False, True
    try:
        done = await _q(commands.prompt, c.hub.commands, _ctx(c, "prompt"), o.id, o.cid, text)
    finally:
        o.writing = False
    o.running = done.value  # from here a cancel finds the item (the editor may send one before we answer)
    if o.cancelled:  # it came while the prompt was being written
        await _q(_cancel_work, c, o, "cancelled from the editor")
    await _settled(c, done)
    if c.hub.runtime is not None:
        c.hub.runtime.work_for(o.cid)
    row = await _q(rm.acp_session, c.hub.read_models, o.id)
    if row and row["prompts"] == 1 and row["title"]:
        await _update(c, o.id, s.SessionInfoUpdate(session_update="session_info_update", title=row["title"]))
    try:
        outcome = await _follow(c, o, done.value, last)
    finally:
        o.running = None
    reason = "cancelled" if outcome == "cancelled" or o.cancelled else "end_turn"
    return _out(s.PromptResponse(stop_reason=reason))


def _working_on(c: Connection, cid: int) -> str | None:
    c.hub.read_models.catch_up()  # the runtime wrote the item's start a moment ago, maybe
    return agents_rm.agent_row(c.hub.read_models, cid).get("working_on")


def _last_seq(c: Connection, cid: int) -> int:
    c.hub.read_models.catch_up()
    tail = agents_rm.transcript(c.hub.read_models, cid, limit=1, tail=True)
    return tail[-1]["seq"] if tail else 0


def _new_entries(c: Connection, cid: int, after: int) -> list[dict]:
    c.hub.read_models.catch_up()
    return _all_entries(c, cid, after)


async def _follow(c: Connection, o: Open, item: str, after: int) -> str:
    """Stream the agent's transcript for ``item`` until the item ends; its outcome."""
    started = False
    tools: dict[str, str] = {}  # tool name -> the id of its latest call (for a result that names no call)
    while True:
        for e in await _q(_new_entries, c, o.cid, after):
            after = e["seq"]
            d = e["detail"] or {}
            if e["kind"] == "told":
                started = started or d.get("item") == item
                continue
            if not started:
                continue
            if e["kind"] == "done" and d.get("item") == item:
                return d.get("outcome") or "done"
            await _entry(c, o, e, tools)
        await anyio.sleep(FOLLOW_POLL_S)


async def _entry(c: Connection, o: Open, e: dict, tools: dict[str, str]) -> None:
    d, kind = e["detail"] or {}, e["kind"]
    if kind == "model":
        if e["text"]:
            await _update(c, o.id, h.update_agent_message_text(e["text"]))
        return
    if kind == "plan" and isinstance(d.get("entries"), list):
        entries = [h.plan_entry(str(x.get("content", ""))[:500], priority=x.get("priority") or "medium",
                                status=x.get("status") or "pending") for x in d["entries"] if isinstance(x, dict)]
        await _update(c, o.id, h.update_plan(entries))
        return
    if kind == "tool_call":
        call_id = str(d.get("call_id") or f"seq-{e['seq']}")
        tools[e["tool"] or ""] = call_id
        effect = d.get("effect")
        status = {"allow": "in_progress", "deny": "failed"}.get(effect, "pending")
        note = d.get("refusal") or (f"refused: {d.get('reason')}" if effect == "deny" else None)
        if effect == "ask":
            note = (f"waits for the owner's approval {d.get('approval')}" +
                    ("" if c.governs else "; this token cannot answer it (the owner decides)"))
        content = [h.tool_content(h.text_block(note))] if note else None
        await _update(c, o.id, h.start_tool_call(call_id, e["tool"] or "tool", status=status, content=content,
                                                 raw_input={"args": d.get("args")}))
        if effect == "ask" and c.governs and d.get("approval") and d["approval"] not in o.asked:
            o.asked.add(d["approval"])
            c.tg.start_soon(_ask_approval, c, o, call_id, e["tool"] or "tool", d["approval"])
        return
    if kind == "tool_result":
        call_id = str(d.get("call_id") or tools.get(e["tool"] or "", f"seq-{e['seq']}"))
        status = "completed" if d.get("ok") else "failed"
        text = (e["text"] or "")[:RESULT_SHOWN]
        await _update(c, o.id, h.update_tool_call(call_id, status=status,
                                                  content=[h.tool_content(h.text_block(text))] if text else None))
        number = _opened_pr(e) if o.mirror is not None and d.get("ok") else None
        if number is not None and number not in o.shown_prs:
            o.shown_prs.add(number)
            c.tg.start_soon(_mirror_pr, c, o, number)
        return
    if kind == "error":
        await _update(c, o.id, h.update_agent_thought_text(f"error: {e['text'] or ''}"))


# -- the repository mirror: the agent's pull request shown, and written back ----------------------------------

def _opened_pr(e: dict) -> str | None:
    """The pull request a ``plaza_git`` result says it opened, or None."""
    if e["tool"] != "plaza_git":
        return None
    try:
        out = orjson.loads(e["text"] or "")
    except orjson.JSONDecodeError:
        return None
    return out["pr"] if isinstance(out, dict) and out.get("opened") and isinstance(out.get("pr"), str) else None


def _pr_changes(c: Connection, number: str) -> tuple[dict, list[dict]]:
    c.hub.read_models.catch_up()
    server = forge.server_of(c.hub)
    return git_rm.pr_row(c.hub.read_models, number), server.changes(number)


async def _mirror_pr(c: Connection, o: Open, number: str) -> None:
    """A pull request the agent opened into the editor's branch: shown as a tool call whose content is its
    diffs, with its link; with write-back on, a govern editor that can write files is asked to apply it."""
    pr, files = await _q(_pr_changes, c, number)
    m = o.mirror
    if m is None or pr.get("repo") != m.repo or pr.get("target") != m.branch:
        return  # a pull request elsewhere: the tool call as it was is all the editor sees
    root = o.cwd or "/"
    link = f"{c.hub.address.rstrip('/')}/#/git/pr/{number}" if getattr(c.hub, "address", None) else None
    content = [h.tool_content(h.text_block(f"{number}: {pr.get('title')} ({pr.get('source')} into {m.branch})"
                                           + (f" {link}" if link else "")))]
    files = [f for f in files if project_path(root, f["path"]) is not None]  # never a path outside the project
    for f in files:
        if f["binary"]:
            content.append(h.tool_content(h.text_block(f"{f['path']}: binary, not shown")))
        else:
            content.append(h.tool_diff_content(project_path(root, f["path"]), f["new"] or "", f["old"]))
    call_id = f"pr-{number}"
    await _update(c, o.id, h.start_tool_call(call_id, f"pull request {number}", kind="edit", status="completed",
                                             content=content, raw_input={"pr": number, "link": link}))
    settings = await _q(rm.settings, c.hub.read_models)
    writes = bool(((c.client_caps or {}).get("fs") or {}).get("writeTextFile"))
    if not (settings["acp_write_back"] and c.governs and writes and c.protocol == PROTOCOL_V1 and o.cwd):
        return  # the guide: only the owner or govern is asked, and only an editor that can write files
    await _write_back(c, o, call_id, number, files)


async def _write_back(c: Connection, o: Open, call_id: str, number: str, files: list[dict]) -> None:
    req = s.RequestPermissionRequest(
        session_id=o.id,
        tool_call=s.ToolCallUpdate(tool_call_id=call_id, title=f"Apply pull request {number} to your project?",
                                   status="pending"),
        options=[s.PermissionOption(option_id="apply", name="Apply", kind="allow_once"),
                 s.PermissionOption(option_id="skip", name="Do not apply", kind="reject_once")])
    answer = None
    with anyio.move_on_after(WRITE_BACK_WAIT_S):
        answer = await c.ask("session/request_permission", _out(req))
    outcome = (answer or {}).get("outcome") or {}
    if outcome.get("outcome") != "selected" or outcome.get("optionId") != "apply":
        await _update(c, o.id, h.update_tool_call(call_id, content=[h.tool_content(h.text_block(
            f"not applied: {number} stays on its branch"))]))
        return
    written, deleted, skipped = [], [], []
    for f in files[:MAX_WRITE_BACK_FILES]:
        if f["new"] is None and not f["binary"]:
            deleted.append(f["path"])
        elif f["binary"] or f["cut"]:
            skipped.append(f["path"])
        else:
            path = project_path(o.cwd, f["path"])
            if path is None:
                skipped.append(f["path"][:200])
                continue
            r = await c.ask("fs/write_text_file", _out(s.WriteTextFileRequest(session_id=o.id, path=path,
                                                                               content=f["new"])))
            (written if r is not None else skipped).append(f["path"])
    skipped += [f["path"] for f in files[MAX_WRITE_BACK_FILES:]]
    said = [f"applied {number}: wrote {len(written)} file(s)"]
    if deleted:
        said.append("deleted in the pull request, remove them yourself: " + ", ".join(deleted))
    if skipped:
        said.append("not written (binary, too large or refused by the editor): " + ", ".join(skipped))
    await _update(c, o.id, h.update_tool_call(call_id, content=[h.tool_content(h.text_block("; ".join(said)))]))


async def _ask_approval(c: Connection, o: Open, call_id: str, tool: str, approval: str) -> None:
    """Put one approval the agent waits on to a govern editor; its answer is the owner's."""
    req = s.RequestPermissionRequest(
        session_id=o.id,
        tool_call=s.ToolCallUpdate(tool_call_id=call_id, title=f"{tool} (approval {approval})", status="pending"),
        options=[s.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                 s.PermissionOption(option_id="deny", name="Deny", kind="reject_once")])
    answer = await c.ask("session/request_permission", _out(req))
    outcome = (answer or {}).get("outcome") or {}
    if outcome.get("outcome") != "selected" or outcome.get("optionId") not in ("allow", "deny"):
        return  # cancelled or unanswered: the approval stays pending for the owner
    approve = outcome["optionId"] == "allow"
    try:
        done = await _q(approval_commands.decide, c.hub.commands, _ctx(c, f"approval {approval}"), approval, approve)
    except Refusal:
        return  # decided meanwhile (in the console): that answer stands
    await _settled(c, done)
    if c.hub.runtime is not None:
        c.hub.runtime.kick()


async def session_cancel(c: Connection, params: dict) -> None:
    req = _parse(s.CancelNotification, params)
    o = _opened(c, req.session_id)
    if o.running is None:
        o.cancelled = o.cancelled or o.writing  # the prompt being written cancels itself once written
        return None
    o.cancelled = True
    await _q(_cancel_work, c, o, "cancelled from the editor")
    return None


def _cancel_work(c: Connection, o: Open, why: str) -> None:
    """Stop the work in progress and the prompts of this session queued behind it."""
    rt = c.hub.runtime
    if rt is None:
        raise Refusal("no_node", "this hub runs without a node; no agent runs work")
    if o.running is None:
        return
    harness = rt.sessions.get(o.cid)
    if harness is None or harness.taken != o.running:
        try:  # not taken yet: taken back from the queue, it ends cancelled
            agent_commands.withdraw(c.hub.commands, _ctx(c, "cancel"), o.cid, o.running, why)
            return
        except Refusal:
            pass  # the agent took it meanwhile
    try:
        rt.cancel_work(o.cid, why)
    except Refusal:
        pass  # it ended meanwhile


async def _slash(c: Connection, o: Open, slash) -> dict:
    if slash.name == "stop":
        if o.running is not None:
            o.cancelled = True
            await _q(_cancel_work, c, o, "/stop from the editor")
            text = "stopped the work in progress"
        else:
            text = "nothing to stop: no prompt of this session is running"
    else:
        working = await _q(_working_on, c, o.cid)
        if working is None:
            text = f"nothing to {slash.name.split('-')[0]}: the agent has no work in progress"
        else:  # the log's word: the agent's next model turn applies it (runtime/steering.py)
            detail = {"command": slash.name, "arg": slash.arg, "session": o.id, "item": working}
            done = await _q(agent_commands.add_entry, c.hub.commands, _ctx(c, f"/{slash.name}"), o.cid, "note",
                            f"/{slash.name}" + (f" {slash.arg}" if slash.arg is not None else ""), None, detail)
            await _settled(c, done)
            text = f"/{slash.name} given: the agent applies it at its next model turn"
    await _update(c, o.id, h.update_agent_message_text(text))
    return _out(s.PromptResponse(stop_reason="end_turn"))


# -- the owner's decisions: govern only ---------------------------------------------------------------------

def _governs(c: Connection, what: str) -> None:
    if not c.governs:
        raise Refusal("not_allowed", f"{what} stays with the owner: an operate token cannot change it (govern can)")


async def session_set_mode(c: Connection, params: dict) -> dict:
    req = _parse(s.SetSessionModeRequest, params)
    o = _opened(c, req.session_id)
    _governs(c, "the approval mode")
    if req.mode_id not in ACP_MODES:
        raise Refusal("invalid_mode", f"the approval mode is one of {', '.join(ACP_MODES)}")
    done = await _q(agent_commands.update, c.hub.commands, _ctx(c, "mode"), o.cid,
                    {"permission_mode": ACP_MODES[req.mode_id]})
    await _settled(c, done)
    await _update(c, o.id, h.update_current_mode(req.mode_id))
    return {}


async def session_set_model(c: Connection, params: dict) -> dict:
    session_id, model = params.get("sessionId"), params.get("modelId")
    if not isinstance(session_id, str) or not isinstance(model, str):
        raise BadParams("session/set_model takes sessionId and modelId")
    o = _opened(c, session_id)
    _governs(c, "the model")
    done = await _q(agent_commands.update, c.hub.commands, _ctx(c, "model"), o.cid, {"model": model})
    await _settled(c, done)
    return {}


METHODS = {
    "initialize": initialize,
    "session/new": session_new,
    "session/load": session_load,
    "session/resume": session_resume,
    "session/prompt": session_prompt,
    "session/cancel": session_cancel,
    "session/set_mode": session_set_mode,
    "session/set_model": session_set_model,
}
