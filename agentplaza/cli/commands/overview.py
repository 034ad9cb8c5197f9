"""agentplaza overview: the plaza at a glance."""

from __future__ import annotations

from ..actions import Action, Area
from ..output import pairs, table


def plaza_line(s: dict) -> str:
    if s.get("held"):
        return f"HELD since {s['since']} by {s['by']}: {s['reason']}"
    return f"running since {s.get('since')}"


def render(d: dict) -> str:
    hub, plaza, ev = d["hub"], d["plaza"], d["events"]
    lines = [pairs({
        "hub": f"{hub['address'] or '-'} (apid {hub['version']})",
        "store": f"{hub['store']['backend']} {hub['store']['where']}",
        "position": hub["position"],
        "plaza": plaza_line(plaza),
        "vault": f"{d['vault']['state']}, {d['vault']['entries']} entries" if "vault" in d else "-",
        "events": ev["total"],
        **({"rules": "{laws} laws, {owner_rules} owner rules; {calls} calls decided, {refused} refused, "
                     "{violations} violations".format(**d["rules"])} if "rules" in d else {}),
        **({"treasury": f"budget {d['treasury']['budget']} ({d['treasury']['budget_usd']}), "
                        f"in circulation {d['treasury']['in_circulation']}, "
                        f"{d['treasury']['pending_payments']} payments waiting"} if "treasury" in d else {}),
        **({"projects": "{projects} projects, {delivered} delivered; {motions_waiting} council motions wait for you"
                        .format(**d["governance"])} if "governance" in d else {}),
    })]
    for u in d.get("log", {}).get("unreadable", []):
        state = f"voided at {u['voided_at']} by {u['voided_by']}" if u["voided_at"] else "NOT voided"
        lines.append(f"unreadable event at position {u['position']}: {u['reason']} ({state})")
    for name, why in d.get("log", {}).get("read_models_failing", {}).items():
        lines.append(f"read model {name} is behind: {why}")
    if ev["by_family"]:
        lines += ["", table([{"family": k, "events": v} for k, v in ev["by_family"].items()])]
    return "\n".join(lines)


#: ``agentplaza overview`` is the whole area: its one action is what it does with none named.
AREA = Area("overview", "the plaza at a glance: hub, plaza, events", (
    Action("show", "the plaza at a glance", "GET", "/v1/overview", render=render, default=True),
))
