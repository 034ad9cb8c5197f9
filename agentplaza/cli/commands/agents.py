"""agentplaza agents create --role R [--count N] [--model M] | list [--role R] | show CID | tell CID --text T
| stop CID | restart CID | wipe CID | retire CID | delete CID | model CID M|default | mode CID MODE
| rename CID NAME | logs CID | sleep CID | wake CID | checkpoint CID [--name N] [--label L] | checkpoints CID
| rollback CID NAME | checkpoint-delete CID NAME | fork CID [--n N] [--checkpoint NAME] | cancel CID [--reason R].
Stop, restart, wipe, retire, delete, rollback and checkpoint-delete ask first unless --yes."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, refuse, table
from .plaza import confirm

NAME = "agents"
ROSTER = ["cid", "name", "role", "status", "run", "model", "permission_mode", "queue"]
#: The actions that ask first, with the question they ask.
ASKS = {
    "stop": "Stop agent {cid}? Its VM shuts down; its workspace is kept.",
    "restart": "Restart agent {cid}? Its running work is dropped; its workspace is kept.",
    "wipe": "Wipe agent {cid}? Its workspace is made new; its queue is dropped.",
    "retire": "Retire agent {cid}? It stops for good; its record stays.",
    "delete": "Delete agent {cid}? It stops and its VM run is deleted.",
}


def register(sub) -> None:
    p = sub.add_parser(NAME, help="spawn, list and drive agents")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    c = s.add_parser("create", help="start 1 to 16 agents of a role")
    c.add_argument("--role", required=True)
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--model", help="provider/model; default: the role's model or the plaza's default")
    ls = s.add_parser("list", help="the roster")
    ls.add_argument("--role")
    for name in ("show", "logs"):
        x = s.add_parser(name, help="the agent page" if name == "show" else "the agent's transcript")
        x.add_argument("cid", type=int)
        if name == "logs":
            x.add_argument("--after", type=int, default=0, help="entries after this number")
            x.add_argument("--limit", type=int, default=200)
    t = s.add_parser("tell", help="send the agent a message (work for it)")
    t.add_argument("cid", type=int)
    t.add_argument("--text", required=True)
    for name, question in ASKS.items():
        x = s.add_parser(name, help=question.format(cid="CID").split("?")[0].lower())
        x.add_argument("cid", type=int)
        x.add_argument("--reason")
        x.add_argument("--yes", action="store_true", help="do not ask to confirm")
    for name in ("sleep", "wake"):
        x = s.add_parser(name, help="put the agent to sleep (VM saved and stopped)" if name == "sleep" else "wake it where it was")
        x.add_argument("cid", type=int)
    ck = s.add_parser("checkpoint", help="save the agent's whole machine under a name")
    ck.add_argument("cid", type=int)
    ck.add_argument("--name")
    ck.add_argument("--label")
    cks = s.add_parser("checkpoints", help="the agent's checkpoints")
    cks.add_argument("cid", type=int)
    rb = s.add_parser("rollback", help="put the agent's machine back in a checkpoint (a safety checkpoint first)")
    rb.add_argument("cid", type=int)
    rb.add_argument("name")
    rb.add_argument("--yes", action="store_true", help="do not ask to confirm")
    cd = s.add_parser("checkpoint-delete", help="delete one of the agent's checkpoints")
    cd.add_argument("cid", type=int)
    cd.add_argument("name")
    cd.add_argument("--yes", action="store_true", help="do not ask to confirm")
    cn = s.add_parser("cancel", help="cancel the work item the agent runs now")
    cn.add_argument("cid", type=int)
    cn.add_argument("--reason")
    fk = s.add_parser("fork", help="start copies of the agent (same role, names of their own) from a checkpoint")
    fk.add_argument("cid", type=int)
    fk.add_argument("--n", type=int, default=1, help="how many copies, 1 to 16")
    fk.add_argument("--checkpoint", help="the checkpoint to start from; default: one taken now")
    m = s.add_parser("model", help="set the agent's model, or `default` to use its role's")
    m.add_argument("cid", type=int)
    m.add_argument("model")
    mo = s.add_parser("mode", help="set the permission mode: autonomous, ask or read-only")
    mo.add_argument("cid", type=int)
    mo.add_argument("mode", choices=["autonomous", "ask", "read-only"])
    rn = s.add_parser("rename", help="give the agent a new name")
    rn.add_argument("cid", type=int)
    rn.add_argument("name")


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


def run(env: Env) -> int:
    a, c = env.args, env.client
    if a.action in (None, "list"):
        return env.show(c.get("/v1/agents", role=getattr(a, "role", None)), lambda d: table(d["agents"], ROSTER))
    if a.action == "create":
        body = {"role": a.role, "count": a.count}
        if a.model:
            body["model"] = a.model
        return env.show(c.post("/v1/agents", body), lambda d: table(d["agents"], ROSTER))
    if a.action == "show":
        return env.show(c.get(f"/v1/agents/{a.cid}"), render_page)
    if a.action == "logs":
        return env.show(c.get(f"/v1/agents/{a.cid}/logs", after=a.after, limit=a.limit),
                        lambda d: render_transcript(d["transcript"]))
    if a.action == "tell":
        return env.show(c.post(f"/v1/agents/{a.cid}/tell", {"text": a.text}),
                        lambda d: f"told agent {d['agent']['cid']} (item {d['item']}, {d['agent']['status']})")
    if a.action in ASKS:
        if not a.yes and not confirm(ASKS[a.action].format(cid=a.cid)):
            return refuse(f"agents {a.action} not confirmed; pass --yes to skip the question", "not_confirmed")
        if a.action == "delete":
            return env.show(c.request("DELETE", f"/v1/agents/{a.cid}"), lambda d: f"deleted agent {d['deleted']}")
        body = {"reason": a.reason} if a.reason else {}
        return env.show(c.post(f"/v1/agents/{a.cid}/{a.action}", body),
                        lambda d: f"agent {d['agent']['cid']}: {d['agent']['run']}, {d['agent']['status']}")
    if a.action in ("sleep", "wake"):
        return env.show(c.post(f"/v1/agents/{a.cid}/{a.action}", {}),
                        lambda d: f"agent {d['agent']['cid']}: {d['agent']['status']}")
    if a.action == "checkpoint":
        body = {k: v for k, v in (("name", a.name), ("label", a.label)) if v}
        return env.show(c.post(f"/v1/agents/{a.cid}/checkpoint", body), lambda d: f"checkpoint {d['name']} saved")
    if a.action == "checkpoints":
        return env.show(c.get(f"/v1/agents/{a.cid}/checkpoints"),
                        lambda d: table(d["checkpoints"], ["name", "label", "created_at", "bytes"]))
    if a.action == "rollback":
        if not a.yes and not confirm(f"Roll agent {a.cid} back to {a.name}? Its running work item is cancelled."):
            return refuse("agents rollback not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.post(f"/v1/agents/{a.cid}/rollback", {"name": a.name}),
                        lambda d: f"agent {a.cid} is back at {a.name} (undo: agents rollback {a.cid} {d['safety']})")
    if a.action == "checkpoint-delete":
        if not a.yes and not confirm(f"Delete checkpoint {a.name} of agent {a.cid}? It cannot be restored after."):
            return refuse("agents checkpoint-delete not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.request("DELETE", f"/v1/agents/{a.cid}/checkpoints/{a.name}"),
                        lambda d: f"checkpoint {a.name} deleted")
    if a.action == "cancel":
        body = {"reason": a.reason} if a.reason else {}
        return env.show(c.post(f"/v1/agents/{a.cid}/cancel", body),
                        lambda d: f"agent {d['agent']['cid']}: work item {d['cancelled']} cancelled")
    if a.action == "fork":
        body = {"n": a.n, **({"checkpoint": a.checkpoint} if a.checkpoint else {})}
        return env.show(c.post(f"/v1/agents/{a.cid}/fork", body),
                        lambda d: f"agent {d['source']} forked at {d['checkpoint']}:\n" + table(d["forks"], ROSTER))
    if a.action == "model":
        model = None if a.model == "default" else a.model
        return env.show(c.request("PATCH", f"/v1/agents/{a.cid}", json={"model": model}), render_page)
    if a.action == "mode":
        return env.show(c.request("PATCH", f"/v1/agents/{a.cid}", json={"permission_mode": a.mode}), render_page)
    if a.action == "rename":
        return env.show(c.request("PATCH", f"/v1/agents/{a.cid}", json={"name": a.name}), render_page)
    return refuse(f"unknown agents action {a.action}")
