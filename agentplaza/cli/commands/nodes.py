"""agentplaza nodes list | show NAME | code --label L [--ttl MIN] | codes [list | revoke ID]: the machines that
run agents (node n0 is the hub's own), and the join codes that bring another machine in."""

from __future__ import annotations

from ..actions import Action, Area, arg, choose
from ..env import Env
from ..output import pairs, table

#: The guide: a code "is valid for 15 minutes by default, and for at most 60" (the hub holds the rule).
TTL_MIN_DEFAULT = 15
CODE_COLUMNS = ["id", "label", "state", "expires_at", "failures", "node"]


def _row(n: dict) -> dict:
    f = n.get("facts") or {}
    state = "revoked" if n.get("revoked") else "draining" if n.get("draining") else "-"
    return {"name": n["name"], "label": n.get("label") or "-", "online": "yes" if n["online"] else "no", "state": state, "cids": f"{n['cid_first']}-{n['cid_last']}",
            "agents": n["agents"], "backend": f.get("backend", "-"), "accel": f.get("accel", "-"),
            "isolation": f.get("isolation", "-")}


def _show(d: dict) -> str:
    n = d["node"]
    f = n.get("facts") or {}
    egress = n.get("egress") or {}
    return pairs({**_row(n), "cpus": f.get("cpus", "-"), "memory_mib": f.get("memory_mib", "-"),
                  "os": f.get("os", "-"), "kernel": f.get("kernel", "-"),
                  "egress": f"{egress.get('egress', '-')} (ports {', '.join(map(str, egress.get('ports') or []))})"
                  if egress else "-"})


NODE_COLUMNS = ["name", "label", "online", "state", "cids", "agents", "backend", "accel"]


def _made(d: dict) -> str:
    c = d["code"]
    return "\n".join([
        f"join code for {c['label']} (shown once: copy it now; valid until {c['expires_at']}):",
        f"  {c['code']}",
        f"it carries the hub's address {c['hub']}" + (f" and its certificate's SHA-256 {c['fingerprint']}"
                                                       if c["fingerprint"] else " (no HTTPS: no certificate)"),
        f"on the machine: agentplaza node join <code>   (revoke it unused: agentplaza nodes codes revoke {c['id']})",
    ])


def codes(env: Env) -> int:
    if env.args.codes_action == "revoke":
        return env.show(env.client.post(f"/v1/join-codes/{env.args.id}/revoke"), lambda d: f"revoked join code {d['revoked']}")
    return env.show(env.client.get("/v1/join-codes"),
                    lambda d: table(d["codes"], CODE_COLUMNS) if d["codes"] else "no join codes")

AREA = Area("nodes", "the machines that run agents", (
    Action("list", "every node, its CID range and its agents", "GET", "/v1/nodes",
           render=lambda d: table([_row(n) for n in d["nodes"]], NODE_COLUMNS), default=True),
    Action("show", "one node with its machine facts", "GET", "/v1/nodes/{name}", args=(arg("name"),), render=_show),
    Action("code", "make a join code for another machine (shown once)", "POST", "/v1/join-codes",
           args=(arg("--label", required=True, help="what to call the machine"),
                 arg("--ttl", type=int, default=TTL_MIN_DEFAULT, metavar="MIN",
                     help=f"minutes the code is valid (default {TTL_MIN_DEFAULT}, at most 60)")),
           body=lambda a: {"label": a.label, "ttl_min": a.ttl}, render=_made),
    Action("codes", "the join codes (list), or revoke an unused one", run=codes,
           args=(choose("codes_action", list=(), revoke=(arg("id", metavar="ID"),)),)),
    Action("drain", "a drained node takes no new agents", "POST", "/v1/nodes/{name}/drain", args=(arg("name"),),
           render=lambda d: f"node {d['node']} drained: it takes no new agents (undrain: agentplaza nodes undrain {d['node']})"),
    Action("undrain", "put a drained node back in service", "POST", "/v1/nodes/{name}/undrain", args=(arg("name"),),
           render=lambda d: f"node {d['node']} is back in service"),
    Action("revoke", "remove a node for good (cannot be undone)", "POST", "/v1/nodes/{name}/revoke", args=(arg("name"),),
           confirm=lambda a: f"Revoke node {a.name}? Its signatures stop working at once, its agents cannot reach "
                             "the hub, and it can come back only as a new node. This cannot be undone.",
           render=lambda d: f"node {d['node']} revoked"),
))
