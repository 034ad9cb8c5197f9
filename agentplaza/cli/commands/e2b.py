"""agentplaza e2b keys list|create --label L|revoke ID [--yes] | sandboxes | kill ID [--yes] | pause ID |
resume ID | templates | delete-template ID [--yes]: the E2B API's keys, sandboxes and templates
(see docs/e2b.md)."""

from __future__ import annotations

from ..actions import YES, Action, Area, arg, confirm
from ..env import Env
from ..output import refuse, table

KEY_COLUMNS = ["id", "label", "created"]
SANDBOX_COLUMNS = ["id", "cid", "template", "state", "started", "ends"]
TEMPLATE_COLUMNS = ["templateID", "names", "buildStatus", "tags", "diskSizeMB", "reason"]


def keys(env: Env) -> int:
    """keys list; keys create --label L (the key is printed once, with the three environment lines);
    keys revoke ID (asks unless --yes)."""
    a = env.args
    if a.op == "list":
        return env.show(env.client.get("/v1/e2b/keys"), lambda d: table(d["keys"], KEY_COLUMNS))
    if a.op == "create":
        if not a.label:
            return refuse("e2b keys create needs --label L", "invalid_label")
        made = env.client.post("/v1/e2b/keys", {"label": a.label})
        return env.show(made, lambda d: "\n".join([f"key {d['id']} ({d['label']}), shown once:", *d["env"]]))
    if not a.id:
        return refuse("e2b keys revoke needs the key's ID", "invalid_request")
    if not a.yes and not confirm(f"Revoke E2B key {a.id}? Every SDK using it stops working."):
        return refuse("e2b keys revoke not confirmed; pass --yes to skip the question", "not_confirmed")
    return env.show(env.client.request("DELETE", f"/v1/e2b/keys/{a.id}"), lambda d: f"revoked {d['revoked']}")


AREA = Area("e2b", "the E2B API: keys, sandboxes (kill, pause, resume)", (
    Action("keys", "the E2B keys: keys list, keys create --label L, keys revoke ID",
           args=(arg("op", choices=("list", "create", "revoke")), arg("id", nargs="?", metavar="ID"),
                 arg("--label", metavar="L", help="what the key is for (create)"), YES),
           run=keys),
    Action("sandboxes", "the sandboxes and their states", "GET", "/v1/e2b/sandboxes",
           render=lambda d: table(d["sandboxes"], SANDBOX_COLUMNS), default=True),
    Action("kill", "end a sandbox", "DELETE", "/v1/e2b/sandboxes/{id}", args=(arg("id", metavar="ID"),),
           confirm=lambda a: f"End sandbox {a.id}?", render=lambda d: f"ended {d['ended']}"),
    Action("pause", "pause a sandbox (its memory is saved, no process left)", "POST",
           "/v1/e2b/sandboxes/{id}/pause", args=(arg("id", metavar="ID"),), render=lambda d: f"paused {d['paused']}"),
    Action("resume", "resume a paused sandbox", "POST", "/v1/e2b/sandboxes/{id}/resume",
           args=(arg("id", metavar="ID"),), render=lambda d: f"resumed {d['resumed']}"),
    Action("templates", "the templates built through the API, with their newest build's status", "GET",
           "/v1/e2b/templates", render=lambda d: table(d["templates"], TEMPLATE_COLUMNS)),
    Action("delete-template", "delete a template and its builds' snapshots", "DELETE", "/v1/e2b/templates/{id}",
           args=(arg("id", metavar="ID"),), confirm=lambda a: f"Delete template {a.id} and its snapshots?",
           render=lambda d: f"deleted {d['deleted']}"),
))
