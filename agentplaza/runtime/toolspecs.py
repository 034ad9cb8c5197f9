"""Every tool an agent's model is offered: its name, a description written for the model, and a JSON
Schema of its input. One place: the lists of tools (``GUEST_TOOLS``, ``HOST_TOOLS``) are made from
these specs, so a tool with no spec cannot exist.

- **Guest tools** (``vm.*``) run inside the agent's own VM, in ``vmm/guest/harness.py``
  (``run_guest_tool``), which checks their arguments itself; their schemas say what it accepts, with
  its own limits (imported from it, so the numbers cannot drift).
- **Host tools** (``plaza_*``) run in the hub (``runtime.HarnessSession._host_tool``). The hub checks a
  host tool's arguments against its schema before the laws see the call (``check_args``): a call that
  does not fit is answered ``bad_request`` with the bad field named, and never reaches the laws or
  approvals.

The schemas use a small subset of JSON Schema, and ``check`` below validates exactly that subset:
``type`` (one or a list), ``properties``, ``required``, ``additionalProperties: false``, ``enum``,
``minimum``, ``maximum``, ``exclusiveMinimum``, ``minLength`` and ``items``. Anthropic's tools take
the schema as it is (no ``anyOf`` at the top level: a tool with several uses, like
``plaza_task_submit``, is one flat object whose description says which fields go together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vmm.guest.harness import MAX_FILE, MAX_OUTPUT, SHELL_MAX_TIMEOUT_S, SHELL_TIMEOUT_S

from ..domain.agents import MAX_SPAWN, MIN_SPAWN
from ..domain.tasks import MAX_TITLE_CHARS
from ..domain.treasury import DEFAULT_TOOL_TASK_BUDGET, MIN_TOOL_TASK_BUDGET

#: The most tasks ``plaza_task_list`` returns.
MAX_TASK_LIST = 50

#: The JSON Schema keywords the specs may use (``check`` validates every one of them).
KEYWORDS = frozenset({"type", "description", "properties", "required", "additionalProperties", "enum",
                      "minimum", "maximum", "exclusiveMinimum", "minLength", "items"})


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict

    @property
    def group(self) -> str:
        """Where it runs: ``vm`` (the agent's own VM) or ``plaza`` (the hub)."""
        return "vm" if self.name.startswith("vm.") else "plaza"

    def summary(self) -> dict:
        return {"name": self.name, "description": self.description}


def _obj(properties: dict | None = None, required: tuple = ()) -> dict:
    schema: dict = {"type": "object", "properties": properties or {}, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _s(description: str, **kw) -> dict:
    return {"type": "string", "description": description, **kw}


_MIB = f"{MAX_FILE // (1 << 20)} MiB"
_PATH = ("A path relative to /workspace (an absolute path must lie inside /workspace; a path that leads "
         "out, symlinks included, is refused).")
_TASK = _s("The task's number, like t1.")

_SPECS = (
    # -- guest tools: run in the agent's own VM by vmm/guest/harness.py ------------------------------
    ToolSpec("vm.shell",
             "Run a shell command in your own VM (/bin/sh -c, in /workspace, with no input). Returns "
             f"'exit N' and the command's combined output, cut to {MAX_OUTPUT:,} characters. The command is "
             f"killed after its timeout (default {SHELL_TIMEOUT_S} s, at most {SHELL_MAX_TIMEOUT_S} s); web "
             "traffic goes through the plaza's egress proxy.",
             _obj({"command": _s("The command line, run by /bin/sh -c with /workspace as the working folder "
                                 "and HOME.", minLength=1),
                   "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": SHELL_MAX_TIMEOUT_S,
                               "description": f"Seconds before the command is killed: default {SHELL_TIMEOUT_S}, "
                                              f"at most {SHELL_MAX_TIMEOUT_S}."}},
                  ("command",))),
    ToolSpec("vm.read_file",
             f"Read a text file in /workspace. Returns its content, cut to {MAX_OUTPUT:,} characters; a file "
             f"over {_MIB} is refused.",
             _obj({"path": _s(_PATH, minLength=1)}, ("path",))),
    ToolSpec("vm.list_dir",
             "List a folder in /workspace: one name a line, sorted, folders ending in '/'. Without a path it "
             "lists /workspace itself.",
             _obj({"path": _s(_PATH + " Default: /workspace.")})),
    ToolSpec("vm.write_file",
             f"Create or replace a file in /workspace with the given text (at most {_MIB}), making its folders "
             "as needed. Returns how many bytes it wrote.",
             _obj({"path": _s(_PATH, minLength=1), "content": _s("The file's whole new content.")},
                  ("path", "content"))),
    ToolSpec("vm.edit_file",
             "Change a file in /workspace by replacing one piece of its text: old must occur exactly once in "
             "the file (include enough of the text around it to make it unique) and is replaced by new.",
             _obj({"path": _s(_PATH, minLength=1),
                   "old": _s("The exact text to replace; it must occur exactly once.", minLength=1),
                   "new": _s("The text to put in its place (may be empty).")},
                  ("path", "old", "new"))),
    ToolSpec("vm.share_file",
             f"Send a file from /workspace (at most {_MIB}) to the hub, where the owner can see it. Returns the "
             "name the hub keeps it under.",
             _obj({"path": _s(_PATH, minLength=1)}, ("path",))),
    # -- host tools: run by the hub (runtime.HarnessSession._host_tool) -----------------------------
    ToolSpec("plaza_status",
             "Your own record and the plaza's state: your CID, role and name, and whether the plaza is held "
             "(STOP ALL: nothing runs until the owner resumes it).",
             _obj()),
    ToolSpec("plaza_roster",
             "The plaza's agents: each one's CID, name, role and status. A CID is what plaza_message takes "
             "as to.",
             _obj()),
    ToolSpec("plaza_toolbox",
             "The tools you are offered now, each with its description, grouped as vm (run in your own VM) "
             "and plaza (run by the hub). A survey, not a grant: every call is still checked by the "
             "plaza's laws.",
             _obj()),
    ToolSpec("plaza_message",
             "Send a message to another agent; it arrives in that agent's queue as a work item. Returns "
             "whether it was sent and the item's id.",
             _obj({"to": {"type": "integer", "description": "The agent's CID (see plaza_roster)."},
                   "text": _s("The message.")},
                  ("to", "text"))),
    ToolSpec("plaza_task_list",
             f"The plaza's tasks that have not ended, oldest first, at most {MAX_TASK_LIST}: each with its "
             "number, title, acceptance, role, budget, state, phase, worker, reviewer and the worker's report.",
             _obj()),
    ToolSpec("plaza_task_create",
             f"Create a task. Its budget (default {DEFAULT_TOOL_TASK_BUDGET:,} credits, at least "
             f"{MIN_TOOL_TASK_BUDGET}) moves from the plaza budget into the task's escrow, which pays the task's "
             "model calls; if the plaza budget cannot cover it, nothing is created. Returns the task with its "
             "number as id (like t3).",
             _obj({"title": _s(f"A short title (at most {MAX_TITLE_CHARS} characters).", minLength=1),
                   "acceptance": _s("What counts as done: the reviewer checks the work against it.", minLength=1),
                   "budget": {"type": ["integer", "null"], "minimum": MIN_TOOL_TASK_BUDGET,
                              "description": f"Credits for the task's escrow: default {DEFAULT_TOOL_TASK_BUDGET:,}, "
                                             f"at least {MIN_TOOL_TASK_BUDGET}."},
                   "details": _s("Anything more the worker needs to know."),
                   "role": _s("The role that should do it, like builder: the scheduler gives it to an idle "
                              "agent of that role."),
                   "parent": _s("The number of the task this one is part of, if any.")},
                  ("title", "acceptance"))),
    ToolSpec("plaza_task_claim",
             "Take an open task to do it yourself, or with review true take the review of a task whose "
             "worker reported it done (never your own work). Returns the task's title, acceptance, details, "
             "budget and the worker's report.",
             _obj({"task": _TASK,
                   "review": {"type": "boolean", "description": "true: take the task's review, not its work."}},
                  ("task",))),
    ToolSpec("plaza_task_submit",
             "Finish your part of a task, one of three ways. As its worker: report it done with summary, "
             "files and checks (it then waits for review), or give up with give_up true and notes (the task "
             "fails). As its reviewer: rule with verdict pass or fail and notes (pass pays the worker from "
             "the escrow; fail ends the task failed).",
             _obj({"task": _TASK,
                   "summary": _s("Worker: what you did."),
                   "files": {"type": ["array", "string"], "items": {"type": "string"},
                             "description": "Worker: the files you changed, as a list of paths (or one string "
                                            "of comma-separated paths)."},
                   "checks": _s("Worker: how you checked the result."),
                   "give_up": {"type": "boolean", "description": "Worker: true to give the task up (with notes)."},
                   "verdict": {"type": "string", "enum": ["pass", "fail"],
                               "description": "Reviewer: your ruling, pass or fail."},
                   "notes": _s("Reviewer: why you ruled so. Worker giving up: why.")},
                  ("task",))),
    ToolSpec("plaza_task_cancel",
             "Withdraw a task before it ends; its escrow returns to the plaza budget. Only the orchestrator "
             "may do this.",
             _obj({"task": _TASK}, ("task",))),
    ToolSpec("plaza_agent_propose",
             "Propose new agents to the owner (you cannot start agents yourself). Only the orchestrator may, "
             "and only when the owner asked for them in the owner's own chat. The proposal waits in the "
             "owner's approvals; nothing starts until the owner approves it. Returns the approval's number.",
             _obj({"role": _s("The role of the new agents, like builder."),
                   "count": {"type": "integer", "minimum": MIN_SPAWN, "maximum": MAX_SPAWN,
                             "description": f"How many ({MIN_SPAWN} to {MAX_SPAWN}); default 1."},
                   "model": _s("provider/model for them; default: their role's model."),
                   "why": _s("What they are for, for the owner to judge.", minLength=1)},
                  ("role", "why"))),
)

#: Every tool an agent may be offered, by name.
SPECS: dict[str, ToolSpec] = {s.name: s for s in _SPECS}
#: The guest tools, run in the agent's VM (the laws decide each call first).
GUEST_TOOLS: tuple[str, ...] = tuple(s.name for s in _SPECS if s.group == "vm")
#: The host tools the hub runs for agents today (the laws decide each call first).
HOST_TOOLS: tuple[str, ...] = tuple(s.name for s in _SPECS if s.group == "plaza")


def spec(tool: str) -> ToolSpec | None:
    return SPECS.get(tool)


def grouped(tools: list[str] | tuple[str, ...]) -> dict[str, list[dict]]:
    """The toolbox: the given tools (those offered), each with its description, as vm and plaza."""
    out: dict[str, list[dict]] = {"vm": [], "plaza": []}
    for t in tools:
        s = SPECS.get(t)
        if s is not None:
            out[s.group].append(s.summary())
    return out


# -- checking arguments --------------------------------------------------------------------------------
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_NAMES = {"object": "an object", "array": "a list", "string": "a string", "integer": "a whole number",
          "number": "a number", "boolean": "true or false", "null": "null"}


def _kind(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](v):
            return _NAMES[name]
    return type(v).__name__


def check(schema: dict, value: Any, where: str = "") -> str | None:
    """The first way ``value`` does not fit ``schema`` (the subset in ``KEYWORDS``), naming the field,
    or None when it fits."""
    field = where or "the input"
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            want = " or ".join(_NAMES[t] for t in types)
            return f"{field} must be {want}, not {_kind(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{field} must be one of {', '.join(map(str, schema['enum']))}"
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{field} must be at least {schema['minimum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{field} must be more than {schema['exclusiveMinimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{field} must be at most {schema['maximum']}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{field} must not be empty" if schema["minLength"] == 1 else \
            f"{field} must be at least {schema['minLength']} characters"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            bad = check(schema["items"], item, f"{field}[{i}]")
            if bad:
                return bad
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                return f"{_join(where, name)} is required"
        if schema.get("additionalProperties") is False:
            extra = sorted(k for k in value if k not in props)
            if extra:
                takes = f"the fields are {', '.join(props)}" if props else "it takes no fields"
                return f"unknown field {_join(where, extra[0])} ({takes})"
        for name, sub in props.items():
            if name in value:
                bad = check(sub, value[name], _join(where, name))
                if bad:
                    return bad
    return None


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def check_args(tool: str, args: Any) -> str | None:
    """Why a call's args do not fit its tool's schema (a message for the model), or None when they fit
    (or the tool has no spec: the laws refuse an unknown tool)."""
    s = SPECS.get(tool)
    if s is None:
        return None
    bad = check(s.input_schema, args)
    return f"{tool}: {bad}" if bad else None


# -- the docs ------------------------------------------------------------------------------------------
def markdown() -> str:
    """The tools section of docs/agents.md (a test keeps the doc equal to it)."""
    lines = []
    for group, title in (("vm", "Guest tools (run in the agent's own VM)"), ("plaza", "Host tools (run by the hub)")):
        lines += [f"**{title}**", ""]
        for s in _SPECS:
            if s.group != group:
                continue
            props = s.input_schema.get("properties") or {}
            req = set(s.input_schema.get("required") or ())
            sig = ", ".join(n if n in req else n + "?" for n in props)
            lines.append(f"- `{s.name} {{{sig}}}`: {s.description}" if props else f"- `{s.name}`: {s.description}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
