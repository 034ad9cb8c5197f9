"""agentplaza toolbox list | flag ID | remove ID: the discoveries agents shared (flagged ones last), and the
owner's flag and remove. Remove asks first unless --yes."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..env import Env
from ..output import table

COLUMNS = ["id", "name", "verdict", "link", "by", "endorsements", "flagged"]
ENTRY = arg("id", help="the entry, like d3")


def remove(env: Env) -> int:
    """``DELETE /v1/toolbox/ID``, with no body."""
    return env.show(env.client.request("DELETE", f"/v1/toolbox/{env.args.id}"), lambda d: f"removed {d['id']}")


AREA = Area("toolbox", "the discoveries agents shared, and the owner's flag and remove", (
    Action("list", "the discoveries: the most endorsed first, flagged ones last", "GET", "/v1/toolbox",
           render=lambda d: table(d["discoveries"], COLUMNS), default=True),
    Action("flag", "flag a discovery: it sorts last and is marked as flagged", "POST", "/v1/toolbox/{id}/flag",
           args=(ENTRY,), body=lambda a: {}, render=lambda d: f"flagged {d['id']}"),
    Action("remove", "remove a discovery from the toolbox", args=(ENTRY,),
           confirm=lambda a: f"Remove discovery {a.id} from the toolbox?", run=remove),
))
