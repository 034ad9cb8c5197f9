"""agentplaza agents create --role R [--count N] [--model M] | list [--role R] | show CID | tell CID --text T
| stop CID | restart CID | wipe CID | retire CID | delete CID | model CID M|default | mode CID MODE
| rename CID NAME | logs CID | sleep CID | wake CID | checkpoint CID [--name N] [--label L] | checkpoints CID
| rollback CID NAME | checkpoint-delete CID NAME | fork CID [--n N] [--checkpoint NAME] | cancel CID [--reason R]
| move CID NODE.
Stop, restart, wipe, retire, delete, rollback and checkpoint-delete ask first unless --yes."""

from __future__ import annotations

from ...wire import PERMISSION_MODES
from ..actions import Action, Area, arg
from ..env import Env
from ..output import pairs, table

ROSTER = ["cid", "name", "role", "status", "run", "model", "permission_mode", "queue"]
CHECKPOINT_COLUMNS = ["name", "label", "created_at", "bytes"]
#: The actions that ask first, with the question they ask.
ASKS = {
    "stop": "Stop agent {cid}? Its VM shuts down; its workspace is kept.",
    "restart": "Restart agent {cid}? Its running work is dropped; its workspace is kept.",
    "wipe": "Wipe agent {cid}? Its workspace is made new; its queue is dropped.",
    "retire": "Retire agent {cid}? It stops for good; its record stays.",
    "delete": "Delete agent {cid}? It stops and its VM run is deleted.",
}
CID_ARG = arg("cid", type=int)


def render_page(d: dict) -> str:
    a = d["agent"]
    head = pairs({
        "cid": a["cid"], "name": a["name"], "role": a["role"], "status": a["status"], "run": a["run"],
        "model": f"{a.get('resolved_model') or a['model'] or '-'} ({a['model_source']})",
        "permission mode": a["permission_mode"], "node": a["node"], "queue": a["queue"], "working on": a["working_on"],
        **({"fork of": f"{a['forked_from']} at {a['fork_checkpoint']}"} if a.get("forked_from") is not None else {}),
    })
    out = head + "\n\n" + render_transcript(d["transcript"])
    conduct = d.get("conduct")
    if conduct:
        force = conduct["in_force"]
        out += (f"\n\nconduct: {conduct['offences']} offences, {conduct['warnings']} warnings, {conduct['fined']} fined; "
                + (", ".join(f"{x['kind']} {x['suspension']} of {x['tool']} until {x['until'][:19]} ({x['law']})"
                             for x in force) if force else "no suspension in force"))
    return out


def render_transcript(entries: list[dict]) -> str:
    if not entries:
        return "(no transcript yet)"
    lines = []
    for e in entries:
        what = e["kind"] + (f" {e['tool']}" if e["tool"] else "")
        detail = e["detail"] or {}
        extra = ""
        if "effect" in detail:
            extra = f" [{detail['effect']}: {detail.get('reason')}]"
        elif "verdict" in detail:
            extra = f" [{detail['verdict']}{': ' + detail['why'] if detail.get('why') else ''}]"
        text = (e["text"] or "").replace("\n", " ")
        lines.append(f"{e['seq']:>5}  {e['at'][:19]}  {e['actor']:<10} {what}{extra}  {text[:200]}")
    return "\n".join(lines)


def render_run(d: dict) -> str:
    return f"agent {d['agent']['cid']}: {d['agent']['run']}, {d['agent']['status']}"


def reason(a) -> dict:
    return {"reason": a.reason} if a.reason else {}


def asking(name: str, **route) -> Action:
    """One of the actions that ask first (ASKS): ``stop CID [--reason R] [--yes]`` and the like."""
    question = ASKS[name]
    return Action(name, question.format(cid="CID").split("?")[0].lower(), args=(CID_ARG, arg("--reason")),
                  confirm=lambda a: question.format(cid=a.cid), **route)


def rollback(env: Env) -> int:
    """``POST /v1/agents/CID/rollback``; what it prints names the checkpoint and how to undo it."""
    a = env.args
    return env.show(env.client.post(f"/v1/agents/{a.cid}/rollback", {"name": a.name}),
                    lambda d: f"agent {a.cid} is back at {a.name} (undo: agents rollback {a.cid} {d['safety']})")


def delete(env: Env) -> int:
    """``DELETE /v1/agents/CID``, with no body."""
    return env.show(env.client.request("DELETE", f"/v1/agents/{env.args.cid}"), lambda d: f"deleted agent {d['deleted']}")


def checkpoint_delete(env: Env) -> int:
    a = env.args
    return env.show(env.client.request("DELETE", f"/v1/agents/{a.cid}/checkpoints/{a.name}"),
                    lambda d: f"checkpoint {a.name} deleted")


def napping(name: str, text: str) -> Action:
    return Action(name, text, "POST", f"/v1/agents/{{cid}}/{name}", args=(CID_ARG,),
                  render=lambda d: f"agent {d['agent']['cid']}: {d['agent']['status']}")


def render_move(d: dict) -> str:
    m = d["move"]
    return (f"agent {m['cid']} moved from {m['from']} to {m['to']}: {m['bytes_moved'] / 1e6:.1f} MB moved "
            f"(of {m['apparent_bytes'] / 1e6:.1f} MB of files) in {m['seconds']:.1f} s; now {d['agent']['status']}")


def render_memory(d: dict) -> str:
    if "notes" in d:
        return table([{**n, "links": ", ".join(n["links"]), "backlinks": ", ".join(n["backlinks"])}
                      for n in d["notes"]], ["note", "title", "links", "backlinks", "by", "updated_at"])
    n = d["note"]
    return "(no such note)" if n is None else f"# {n['title']}  ({n['by']}, {n['updated_at']})\n\n{n['text']}"


AREA = Area("agents", "spawn, list and drive agents", (
    Action("create", "start 1 to 16 agents of a role", "POST", "/v1/agents",
           args=(arg("--role", required=True), arg("--count", type=int, default=1),
                 arg("--model", help="provider/model; default: the role's model or the plaza's default")),
           body=lambda a: {"role": a.role, "count": a.count, **({"model": a.model} if a.model else {})},
           render=lambda d: table(d["agents"], ROSTER)),
    Action("list", "the roster", "GET", "/v1/agents", args=(arg("--role"),),
           query=lambda a: {"role": getattr(a, "role", None)}, render=lambda d: table(d["agents"], ROSTER),
           default=True),
    Action("show", "the agent page", "GET", "/v1/agents/{cid}", args=(CID_ARG,), render=render_page),
    Action("logs", "the agent's transcript", "GET", "/v1/agents/{cid}/logs",
           args=(CID_ARG, arg("--after", type=int, default=0, help="entries after this number"),
                 arg("--limit", type=int, default=200)),
           query=lambda a: {"after": a.after, "limit": a.limit}, render=lambda d: render_transcript(d["transcript"])),
    Action("memory", "the agent's memory: its notes and their links, or one note's text with --note", "GET",
           "/v1/agents/{cid}/memory", args=(CID_ARG, arg("--note", help="one note, by its title")),
           query=lambda a: {"note": a.note} if a.note else {}, render=render_memory),
    Action("tell", "send the agent a message (work for it)", "POST", "/v1/agents/{cid}/tell",
           args=(CID_ARG, arg("--text", required=True)), body=lambda a: {"text": a.text},
           render=lambda d: f"told agent {d['agent']['cid']} (item {d['item']}, {d['agent']['status']})"),
    *(asking(name, method="POST", path=f"/v1/agents/{{cid}}/{name}", body=reason, render=render_run)
      for name in ("stop", "restart", "wipe", "retire")),
    asking("delete", run=delete),
    napping("sleep", "put the agent to sleep (VM saved and stopped)"),
    napping("wake", "wake it where it was"),
    Action("checkpoint", "save the agent's whole machine under a name", "POST", "/v1/agents/{cid}/checkpoint",
           args=(CID_ARG, arg("--name"), arg("--label")),
           body=lambda a: {k: v for k, v in (("name", a.name), ("label", a.label)) if v},
           render=lambda d: f"checkpoint {d['name']} saved"),
    Action("checkpoints", "the agent's checkpoints", "GET", "/v1/agents/{cid}/checkpoints", args=(CID_ARG,),
           render=lambda d: table(d["checkpoints"], CHECKPOINT_COLUMNS)),
    Action("rollback", "put the agent's machine back in a checkpoint (a safety checkpoint first)",
           args=(CID_ARG, arg("name")),
           confirm=lambda a: f"Roll agent {a.cid} back to {a.name}? Its running work item is cancelled.",
           run=rollback),
    Action("checkpoint-delete", "delete one of the agent's checkpoints", args=(CID_ARG, arg("name")),
           confirm=lambda a: f"Delete checkpoint {a.name} of agent {a.cid}? It cannot be restored after.",
           run=checkpoint_delete),
    Action("cancel", "cancel the work item the agent runs now", "POST", "/v1/agents/{cid}/cancel",
           args=(CID_ARG, arg("--reason")), body=reason,
           render=lambda d: f"agent {d['agent']['cid']}: work item {d['cancelled']} cancelled"),
    Action("fork", "start copies of the agent (same role, names of their own) from a checkpoint", "POST",
           "/v1/agents/{cid}/fork",
           args=(CID_ARG, arg("--n", type=int, default=1, help="how many copies, 1 to 16"),
                 arg("--checkpoint", help="the checkpoint to start from; default: one taken now")),
           body=lambda a: {"n": a.n, **({"checkpoint": a.checkpoint} if a.checkpoint else {})},
           render=lambda d: f"agent {d['source']} forked at {d['checkpoint']}:\n" + table(d["forks"], ROSTER)),
    Action("move", "move the agent's machine to another node (it sleeps, is copied, and wakes there)", "POST",
           "/v1/agents/{cid}/move", args=(CID_ARG, arg("node", help="the node to move it to (see nodes list)")),
           body=lambda a: {"node": a.node}, render=render_move),
    Action("model", "set the agent's model, or `default` to use its role's", "PATCH", "/v1/agents/{cid}",
           args=(CID_ARG, arg("model")), body=lambda a: {"model": None if a.model == "default" else a.model},
           render=render_page),
    Action("mode", "set the permission mode: autonomous, ask or read-only", "PATCH", "/v1/agents/{cid}",
           args=(CID_ARG, arg("mode", choices=PERMISSION_MODES)), body=lambda a: {"permission_mode": a.mode},
           render=render_page),
    Action("rename", "give the agent a new name", "PATCH", "/v1/agents/{cid}",
           args=(CID_ARG, arg("name")), body=lambda a: {"name": a.name}, render=render_page),
))
