"""agentplaza templates list | rm KEY [--yes]: the hub machine's warm templates (node n0)."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import table

TEMPLATE_COLUMNS = ["key", "vcpus", "memory_mib", "bytes", "created_at"]

AREA = Area("templates", "the hub machine's warm templates: new agents restore one instead of booting", (
    Action("list", "the warm templates", "GET", "/v1/templates",
           render=lambda d: table(d["templates"], TEMPLATE_COLUMNS) if d["templates"] else "(no warm templates)",
           default=True),
    Action("rm", "remove a template (agents already restored from it keep running)", "DELETE", "/v1/templates/{key}",
           args=(arg("key"),),
           confirm=lambda a: f"Remove template {a.key}? The next agent of its shape boots cold.",
           render=lambda d: f"template {d['removed']} removed"),
))
