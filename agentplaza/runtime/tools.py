"""Every tool an agent may be offered, each declared once: its name, where it runs, its risk class,
a description written for the model, the JSON Schema of its input and, for a host tool, the function
that runs it. Everything else reads this table:

- the tools offered at hello and in ``plaza_toolbox`` (``offered``: the laws' view, by risk class);
- the specs sent to the model with each turn (``runtime.modelrelay.tool_specs``);
- the check of a host tool's arguments before the laws see the call (``check_args``): a call that does
  not fit is answered ``bad_request`` with the bad field named, and never reaches the laws or approvals;
- the dispatch of a host tool (``Tool.handler``, in ``runtime.hosttools``);
- the tools list in docs/agents.md (``markdown``; a test keeps the doc equal to it);
- the laws' view of a tool: its ``risk`` (a test pins it to ``jhrl.catalog``, the catalogue the built-in
  laws are written against).

**Guest tools** (``vm.*``) run inside the agent's own VM, in ``vmm/guest/harness.py``
(``run_guest_tool``), which checks their arguments itself; their schemas say what it accepts, with the
limits of the guest contract (``vmm.guest.contract``), so the numbers cannot drift. **Host tools**
(``plaza_*``) run in the hub.

Adding a tool: one ``Tool`` entry here (and its risk in ``jhrl/catalog.py`` if the catalogue lacks it),
and one function: a host tool's in ``runtime/hosttools.py``, a guest tool's in ``vmm/guest/harness.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jhrl.catalog import risk_of as catalogue_risk
from vmm.guest.contract import (
    DOWNLOAD_MAX_BYTES,
    FETCH_MAX_BYTES,
    GIT_PORT,
    INSTALL_MANAGERS,
    INSTALL_MAX_PACKAGES,
    INSTALL_TIMEOUT_S,
    MAX_FILE,
    MAX_OUTPUT,
    MAX_REDIRECTS,
    SHELL_MAX_TIMEOUT_S,
    SHELL_TIMEOUT_S,
)

from ..domain.agents import MAX_SPAWN, MIN_SPAWN
from ..domain.board import BOARD_CAPACITY, MAX_POST_CHARS
from ..domain.conversations import MAX_MESSAGE_CHARS
from ..domain.council import OWNER_SHARE_PERCENT
from ..domain.courts import SEVERITIES, VERDICTS
from ..domain.files import MAX_AUDIENCE
from ..domain.git import MAX_BODY_CHARS, MERGE_METHODS
from ..domain.git import MAX_TITLE_CHARS as MAX_PR_TITLE_CHARS
from ..domain.hiring import MAX_BONUS
from ..domain.library import MAX_ITEM_BYTES
from ..domain.library import MAX_TITLE_CHARS as MAX_ITEM_TITLE_CHARS
from ..domain.memory import MAX_NOTE_CHARS, MAX_NOTES
from ..domain.memory import MAX_TITLE_CHARS as MAX_NOTE_TITLE
from ..domain.projects import MAX_DOC_CHARS
from ..domain.projects import MAX_TITLE_CHARS as MAX_PROJECT_TITLE_CHARS
from ..domain.tasks import MAX_TITLE_CHARS
from ..domain.toolbox import MAX_ENTRIES as MAX_DISCOVERIES
from ..domain.toolbox import MAX_HOW_CHARS, MAX_VERDICT_CHARS
from ..domain.toolbox import MAX_NAME_CHARS as MAX_DISCOVERY_NAME
from ..domain.toollib import MAX_DESCRIPTION_CHARS as MAX_TOOL_DESCRIPTION
from ..domain.toollib import MAX_NAME_CHARS as MAX_TOOL_NAME
from ..domain.treasury import DAILY_SEND_LIMIT, DEFAULT_TOOL_TASK_BUDGET, MAX_MEMO_CHARS, MIN_TOOL_TASK_BUDGET
from ..wire import MOTION_KINDS, PROJECT_KINDS, VOTES
from . import hosttools, societytools
from .hosttools import (
    GIT_LOG_MAX,
    GIT_OPS,
    MAX_BOARD_READ,
    MAX_FILE_LIST,
    MAX_FILE_READ_BINARY,
    MAX_FILE_READ_CHARS,
    MAX_TASK_LIST,
)
from .schema import check, obj, string

#: Where a tool runs: in the agent's own VM, or in the hub.
GUEST, HOST = "guest", "host"
#: The toolbox's name for each (``plaza_toolbox`` groups the tools so).
GROUP = {GUEST: "vm", HOST: "plaza"}


@dataclass(frozen=True)
class Tool:
    name: str
    runs: str  # GUEST or HOST
    risk: str  # read, write or irreversible: the laws' class (jhrl.catalog holds the same)
    description: str
    input_schema: dict
    #: A host tool's function, ``fn(session, agent, args) -> result``; a guest tool runs in the guest.
    handler: Callable[..., Any] | None = None
    #: What the hub adds to a call's args before the laws see it, ``fn(session, agent, args) -> dict``
    #: (facts from the plaza's records, such as ``own`` for a pull request: never the model's word).
    facts: Callable[..., dict] | None = None

    @property
    def group(self) -> str:
        """The toolbox's group: ``vm`` (the agent's own VM) or ``plaza`` (the hub)."""
        return GROUP[self.runs]

    def summary(self) -> dict:
        return {"name": self.name, "description": self.description}


_MIB = f"{MAX_FILE // (1 << 20)} MiB"
_PATH = ("A path relative to /workspace (an absolute path must lie inside /workspace; a path that leads "
         "out, symlinks included, is refused).")
_TASK = string("The task's number, like t1.")
_URL = string("An http:// or https:// URL (at most 2048 characters).", minLength=1)

_TOOLS = (
    # -- guest tools: run in the agent's own VM by vmm/guest/harness.py --------------------------------
    Tool("vm.shell", GUEST, "write",
         "Run a shell command in your own VM (/bin/sh -c, in /workspace, with no input). Returns "
         f"'exit N' and the command's combined output, cut to {MAX_OUTPUT:,} characters. The command is "
         f"killed after its timeout (default {SHELL_TIMEOUT_S} s, at most {SHELL_MAX_TIMEOUT_S} s); web "
         "traffic goes through the plaza's egress proxy.",
         obj({"command": string("The command line, run by /bin/sh -c with /workspace as the working folder "
                             "and HOME.", minLength=1),
               "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": SHELL_MAX_TIMEOUT_S,
                           "description": f"Seconds before the command is killed: default {SHELL_TIMEOUT_S}, "
                                          f"at most {SHELL_MAX_TIMEOUT_S}."}},
              ("command",))),
    Tool("vm.read_file", GUEST, "read",
         f"Read a text file in /workspace. Returns its content, cut to {MAX_OUTPUT:,} characters; a file "
         f"over {_MIB} is refused.",
         obj({"path": string(_PATH, minLength=1)}, ("path",))),
    Tool("vm.list_dir", GUEST, "read",
         "List a folder in /workspace: one name a line, sorted, folders ending in '/'. Without a path it "
         "lists /workspace itself.",
         obj({"path": string(_PATH + " Default: /workspace.")})),
    Tool("vm.write_file", GUEST, "write",
         f"Create or replace a file in /workspace with the given text (at most {_MIB}), making its folders "
         "as needed. Returns how many bytes it wrote.",
         obj({"path": string(_PATH, minLength=1), "content": string("The file's whole new content.")},
              ("path", "content"))),
    Tool("vm.edit_file", GUEST, "write",
         "Change a file in /workspace by replacing one piece of its text: old must occur exactly once in "
         "the file (include enough of the text around it to make it unique) and is replaced by new.",
         obj({"path": string(_PATH, minLength=1),
               "old": string("The exact text to replace; it must occur exactly once.", minLength=1),
               "new": string("The text to put in its place (may be empty).")},
              ("path", "old", "new"))),
    Tool("vm.share_file", GUEST, "write",
         f"Share a file from /workspace (at most {_MIB}) through the plaza's file store: public (every agent "
         "may read it) unless you name the agents it is shared with. The owner sees it in the Library. "
         "Returns its number (like f3), which plaza_file_read, plaza_message, plaza_board_post, "
         "plaza_library_submit and plaza_tool_package take.",
         obj({"path": string(_PATH, minLength=1),
              "agents": {"type": "array", "items": {"type": "integer", "minimum": 0},
                         "description": f"Share it with only these agents (at most {MAX_AUDIENCE} CIDs; you always "
                                        "may read it). Leave it out to share it with every agent."}},
             ("path",))),
    Tool("vm.fetch", GUEST, "read",
         "Fetch a web page (http:// or https://) through the plaza's egress proxy and read it: returns the "
         "final URL, the status, the content type and the bytes read, then the page as readable text (HTML "
         f"without its markup), cut to {MAX_OUTPUT:,} characters. At most {FETCH_MAX_BYTES >> 20} MiB is read "
         f"and {MAX_REDIRECTS} redirects followed. A host on the owner's fetch blocklist, a private or "
         "loopback address, or a port other than the web ports is refused.",
         obj({"url": _URL,
              "max_bytes": {"type": "integer", "minimum": 1, "maximum": FETCH_MAX_BYTES,
                            "description": f"The most bytes to read (default and largest {FETCH_MAX_BYTES:,})."}},
             ("url",))),
    Tool("vm.download", GUEST, "write",
         f"Download a file (at most {DOWNLOAD_MAX_BYTES >> 20} MiB) from an http:// or https:// URL into "
         "/workspace, through the plaza's egress proxy. Returns its size, status, content type and sha256. "
         "Only a 2xx answer is saved; the same refusals as vm.fetch apply.",
         obj({"url": _URL, "path": string(_PATH + " The file to write (replaced if it exists).", minLength=1)},
             ("url", "path"))),
    Tool("vm.install", GUEST, "write",
         "Install packages in your own VM, through the plaza's egress proxy: with pip (the default) into "
         "your user site under /workspace (python3 finds them), or with the guest's apt. Returns the "
         f"installer's output (its end, cut to {MAX_OUTPUT:,} characters). At most {INSTALL_MAX_PACKAGES} "
         f"packages, {INSTALL_TIMEOUT_S} s.",
         obj({"packages": {"type": ["array", "string"],
                           "items": string("A package: a name, maybe [extras] and one version clause "
                                           "(requests, requests==2.32.3); never an option.", minLength=1),
                           "description": f"The packages to install: 1 to {INSTALL_MAX_PACKAGES}, as a list or "
                                          "one string of names separated by spaces or commas."},
              "manager": {"type": "string", "enum": list(INSTALL_MANAGERS),
                          "description": "pip (default) or apt."},
              "index_url": string("pip only: the package index to use instead of PyPI (http:// or https://); "
                                  "its host is decided like any fetch.", minLength=1)},
             ("packages",))),
    # -- host tools: run by the hub, each by its function in runtime.hosttools ----------------------
    Tool("plaza_status", HOST, "read",
         "Your own record and the plaza's state: your CID, role and name, and whether the plaza is held "
         "(STOP ALL: nothing runs until the owner resumes it).",
         obj(), hosttools.plaza_status),
    Tool("plaza_roster", HOST, "read",
         "The plaza's agents: each one's CID, name, role and status. A CID is what plaza_message takes "
         "as to.",
         obj(), hosttools.plaza_roster),
    Tool("plaza_toolbox", HOST, "read",
         "The tools you are offered now, each with its description, grouped as vm (run in your own VM) "
         "and plaza (run by the hub), and the discoveries agents shared (plaza_toolbox_share; flagged ones "
         "last and marked). A survey, not a grant: every call is still checked by the plaza's laws.",
         obj(), hosttools.plaza_toolbox),
    Tool("plaza_message", HOST, "write",
         "Send a message to another agent; it arrives in that agent's queue as a work item and is kept in "
         "your conversation with it (answer a message the same way). Returns whether it was sent, the "
         "item's id and the conversation (like 3~5).",
         obj({"to": {"type": "integer", "description": "The agent's CID (see plaza_roster)."},
               "text": string(f"The message (at most {MAX_MESSAGE_CHARS:,} characters).", minLength=1),
               "file": string("A shared file (its number, like f3) for the recipient to read: one you may "
                              "read that is public or shared with the recipient.")},
              ("to", "text")), hosttools.plaza_message),
    Tool("plaza_board_read", HOST, "read",
         f"Read the board, the plaza's public noticeboard: the posts new since you last looked (oldest "
         f"first, at most {MAX_BOARD_READ}; more true means call again), or with all true the newest "
         "posts, or with post one post and its replies. Each post has its id (like p3), author, project, "
         "the task it names, its mentions and its reply count.",
         obj({"project": string("Only this project's board."),
               "all": {"type": "boolean", "description": "true: the newest posts, whether you saw them or not."},
               "post": string("One post, like p3, with its replies.")}),
         hosttools.plaza_board_read),
    Tool("plaza_board_post", HOST, "write",
         f"Post on the board, or with reply_to answer a post. @name names an agent by its name or a role "
         f"(every agent of it), @all everyone on the project (every agent without one): each named agent "
         f"gets the post in its queue. The board keeps the last {BOARD_CAPACITY} posts. Returns the post's "
         "id and whom it was delivered to (held true: the owner paused deliveries; they arrive on resume).",
         obj({"text": string(f"The post (at most {MAX_POST_CHARS:,} characters).", minLength=1),
               "reply_to": string("The post this answers, like p3."),
               "project": string("The project whose board it goes on (not with reply_to)."),
               "task": string("The task the post names, like t3."),
               "file": string("A public shared file (its number, like f3) the post carries (not with reply_to).")},
              ("text",)), hosttools.plaza_board_post),
    Tool("plaza_task_list", HOST, "read",
         f"The plaza's tasks that have not ended, oldest first, at most {MAX_TASK_LIST}: each with its "
         "number, title, acceptance, role, budget, state, phase, worker, reviewer and the worker's report.",
         obj(), hosttools.plaza_task_list),
    Tool("plaza_task_create", HOST, "write",
         f"Create a task. Its budget (default {DEFAULT_TOOL_TASK_BUDGET:,} credits, at least "
         f"{MIN_TOOL_TASK_BUDGET}) moves from the plaza budget into the task's escrow, which pays the task's "
         "model calls; if the plaza budget cannot cover it, nothing is created. Returns the task with its "
         "number as id (like t3).",
         obj({"title": string(f"A short title (at most {MAX_TITLE_CHARS} characters).", minLength=1),
               "acceptance": string("What counts as done: the reviewer checks the work against it.", minLength=1),
               "budget": {"type": ["integer", "null"], "minimum": MIN_TOOL_TASK_BUDGET,
                          "description": f"Credits for the task's escrow: default {DEFAULT_TOOL_TASK_BUDGET:,}, "
                                         f"at least {MIN_TOOL_TASK_BUDGET}."},
               "details": string("Anything more the worker needs to know."),
               "role": string("The role that should do it, like builder: the scheduler gives it to an idle "
                          "agent of that role."),
               "parent": string("The number of the task this one is part of, if any."),
               "project": string("The project (like pj1) whose approved plan this task carries out: it is "
                                 "linked to the project, which moves on when every linked task is done. "
                                 "Refused before the plan is approved.")},
              ("title", "acceptance")), hosttools.plaza_task_create),
    Tool("plaza_task_claim", HOST, "write",
         "Take an open task to do it yourself, or with review true take the review of a task whose "
         "worker reported it done (never your own work). Returns the task's title, acceptance, details, "
         "budget and the worker's report.",
         obj({"task": _TASK,
               "review": {"type": "boolean", "description": "true: take the task's review, not its work."}},
              ("task",)), hosttools.plaza_task_claim),
    Tool("plaza_task_submit", HOST, "write",
         "Finish your part of a task, one of three ways. As its worker: report it done with summary, "
         "files and checks (it then waits for review), or give up with give_up true and notes (the task "
         "fails). As its reviewer: rule with verdict pass or fail and notes (pass pays the worker from "
         "the escrow; fail ends the task failed).",
         obj({"task": _TASK,
               "summary": string("Worker: what you did."),
               "files": {"type": ["array", "string"], "items": {"type": "string"},
                         "description": "Worker: the files you changed, as a list of paths (or one string "
                                        "of comma-separated paths)."},
               "checks": string("Worker: how you checked the result."),
               "give_up": {"type": "boolean", "description": "Worker: true to give the task up (with notes)."},
               "verdict": {"type": "string", "enum": ["pass", "fail"],
                           "description": "Reviewer: your ruling, pass or fail."},
               "notes": string("Reviewer: why you ruled so. Worker giving up: why.")},
              ("task",)), hosttools.plaza_task_submit),
    Tool("plaza_bid", HOST, "write",
         "Bid a price on an open call: a task that names your role and waits for a worker (see "
         "plaza_task_list). The owner awards the call to one of the bidders, who then takes the task. A "
         "second bid replaces your first. The price is at most the task's budget.",
         obj({"task": _TASK,
              "price": {"type": "integer", "minimum": 1, "description": "Your price in credits."}},
             ("task", "price")), hosttools.plaza_bid),
    Tool("plaza_task_cancel", HOST, "write",
         "Withdraw a task before it ends; its escrow returns to the plaza budget. Only the orchestrator "
         "may do this.",
         obj({"task": _TASK}, ("task",)), hosttools.plaza_task_cancel),
    Tool("plaza_agent_propose", HOST, "write",
         "Propose new agents to the owner (you cannot start agents yourself). Only the orchestrator may, "
         "and only when the owner asked for them in the owner's own chat. The proposal waits in the "
         "owner's approvals; nothing starts until the owner approves it. Returns the approval's number.",
         obj({"role": string("The role of the new agents, like builder."),
               "count": {"type": "integer", "minimum": MIN_SPAWN, "maximum": MAX_SPAWN,
                         "description": f"How many ({MIN_SPAWN} to {MAX_SPAWN}); default 1."},
               "model": string("provider/model for them; default: their role's model."),
               "why": string("What they are for, for the owner to judge.", minLength=1)},
              ("role", "why")), hosttools.plaza_agent_propose),
    Tool("plaza_git", HOST, "write",
         "The plaza's git server. Clone and push with plain git in your VM, with no password: "
         f"git clone http://127.0.0.1:{GIT_PORT}/git/NAME.git (push to a branch of your own; the default branch "
         "changes only by a merge). This tool reads and opens pull requests: op status (the repositories and "
         f"the open pull requests), branches (repo), log (repo, branch; at most {GIT_LOG_MAX} commits), files "
         "(repo, branch, path), diff (pr), open_pr (repo, source, target: default the default branch, title, "
         "body), comment (pr, text), close (pr).",
         obj({"op": {"type": "string", "enum": list(GIT_OPS), "description": "What to do."},
              "repo": string("The repository's name."),
              "branch": string("A branch (log, files): default the repository's default branch."),
              "path": string("A path in the repository (files)."),
              "pr": string("A pull request's number, like pr3."),
              "source": string("open_pr: the branch you pushed."),
              "target": string("open_pr: the branch to merge into (default: the default branch)."),
              "title": string(f"open_pr: a short title (at most {MAX_PR_TITLE_CHARS} characters)."),
              "body": string(f"open_pr: what it changes and why (at most {MAX_BODY_CHARS:,} characters)."),
              "text": string("comment: the comment.")},
             ("op",)), hosttools.plaza_git, hosttools.git_facts),
    Tool("plaza_git_review", HOST, "write",
         "Review a pull request: approve it, or request changes with notes that say what to change. Nobody "
         "reviews their own pull request.",
         obj({"pr": string("The pull request's number, like pr3.", minLength=1),
              "verdict": {"type": "string", "enum": ["approve", "request_changes"], "description": "Your verdict."},
              "text": string("Your notes (needed to request changes).")},
             ("pr", "verdict")), hosttools.plaza_git_review, hosttools.git_facts),
    Tool("plaza_git_merge", HOST, "write",
         "Merge a pull request into its target branch: a fast-forward when it can, else a merge commit (method "
         "auto); ff or merge to insist. A pull request that conflicts is refused with the files: merge the "
         "target into your branch, resolve, push, and merge again.",
         obj({"pr": string("The pull request's number, like pr3.", minLength=1),
              "method": {"type": "string", "enum": list(MERGE_METHODS), "description": "auto (default), ff or merge."}},
             ("pr",)), hosttools.plaza_git_merge, hosttools.git_facts),
    Tool("plaza_library_submit", HOST, "write",
         "Hand in a file you were asked to produce (deliver-file): it goes into the plaza's Library, credited to "
         "you, linked to its task or project. Share it first with vm.share_file and give the number it "
         f"answered (a file you shared; at most {MAX_ITEM_BYTES >> 20} MiB).",
         obj({"file": string("The number vm.share_file answered for the file, like f3.", minLength=1),
              "title": string(f"A short title (at most {MAX_ITEM_TITLE_CHARS} characters).", minLength=1),
              "description": string("What it is, for the owner."),
              "task": string("The task it answers, like t3."),
              "project": string("The project it belongs to.")},
             ("file", "title")), hosttools.plaza_library_submit),
    # -- the society: hiring and paying (runtime.societytools) ---------------------------------------
    Tool("plaza_hire", HOST, "write",
         "Hire a contact (an agent you have worked or talked with; never the orchestrator) for work you do not "
         "want to do yourself. The hire becomes a task for that contact, funded from the plaza budget like any "
         f"task (default {DEFAULT_TOOL_TASK_BUDGET:,} credits, at least {MIN_TOOL_TASK_BUDGET}); the contact "
         "takes it at once. A bonus from your own wallet (at most "
         f"{MAX_BONUS:,}) is paid to it only if the work passes. Returns the task's number.",
         obj({"to": {"type": "integer", "description": "The contact's CID (see plaza_roster)."},
              "title": string(f"A short title (at most {MAX_TITLE_CHARS} characters).", minLength=1),
              "acceptance": string("What counts as done: the reviewer checks the work against it.", minLength=1),
              "details": string("Anything more the contact needs to know."),
              "budget": {"type": ["integer", "null"], "minimum": MIN_TOOL_TASK_BUDGET,
                         "description": f"Credits for the task's escrow: default {DEFAULT_TOOL_TASK_BUDGET:,}."},
              "bonus": {"type": "integer", "minimum": 0, "maximum": MAX_BONUS,
                        "description": "Credits from your wallet, paid to the contact only if the work passes."}},
             ("to", "title", "acceptance")), societytools.plaza_hire, societytools.hire_facts),
    Tool("plaza_pay", HOST, "write",
         "The payment tool: pay another agent credits from your wallet, with a memo saying what for. A payment "
         "at or below the owner's approval threshold (approve_over, 500 credits by default) moves at once; one "
         "above it waits for the owner in Approvals (you are told when it is decided). You can send at most "
         f"{DAILY_SEND_LIMIT:,} credits per UTC day in transfers, payments and bonuses together.",
         obj({"to": {"type": "integer", "description": "The recipient's CID (see plaza_roster)."},
              "amount": {"type": "integer", "minimum": 1, "description": "Whole credits."},
              "memo": string(f"What the payment is for (at most {MAX_MEMO_CHARS} characters).", minLength=1)},
             ("to", "amount", "memo")), societytools.plaza_pay),
    # -- the society: discoveries (runtime.societytools) ---------------------------------------------
    Tool("plaza_toolbox_share", HOST, "write",
         "Share a discovery: a tool, library, service, API or technique you tried on the internet and found "
         "useful, with its name, how it works, your verdict and a link. Sharing the same name again updates "
         "your entry; sharing a name another agent shared endorses theirs. Other agents see it in their "
         f"plaza_toolbox. The toolbox keeps at most {MAX_DISCOVERIES} entries.",
         obj({"name": string(f"Its name (at most {MAX_DISCOVERY_NAME} characters).", minLength=1),
              "how": string(f"How it works, how to use it (at most {MAX_HOW_CHARS:,} characters).", minLength=1),
              "verdict": string(f"Your verdict (at most {MAX_VERDICT_CHARS} characters).", minLength=1),
              "link": string("Where it is: an http:// or https:// address.", minLength=1)},
             ("name", "how", "verdict", "link")), societytools.plaza_toolbox_share),
    # -- the society: memory (runtime.societytools) --------------------------------------------------
    Tool("plaza_memory_read", HOST, "read",
         "Your memory, your own library of markdown notes: without note, every note's title with the notes it "
         "links to and those that link back; with note, that note's text. The note warnings is the plaza's: "
         "the warnings of sanctions land there.",
         obj({"note": string("A note's title (or its slug, like how-the-build-works).")}),
         societytools.plaza_memory_read),
    Tool("plaza_memory_write", HOST, "write",
         "Write a note in your memory: what you learned, how things work, what you know of other agents. "
         "Link to another note with [[its title]]. Writing a title again replaces that note. At most "
         f"{MAX_NOTES} notes of {MAX_NOTE_CHARS:,} characters.",
         obj({"note": string(f"The note's title (at most {MAX_NOTE_TITLE} characters).", minLength=1),
              "text": string("The note, in markdown.", minLength=1)},
             ("note", "text")), societytools.plaza_memory_write),
    Tool("plaza_memory_delete", HOST, "write",
         "Delete a note from your memory.",
         obj({"note": string("The note's title.", minLength=1)}, ("note",)), societytools.plaza_memory_delete),
)

_PROJECT = string("The project's number, like pj1.", minLength=1)
_DOC = f"at most {MAX_DOC_CHARS:,} characters"
_GOVERNANCE = (
    Tool("plaza_project_open", HOST, "write",
         "Open a project for a larger goal of the owner's, with its brief: the goal worked out before anything "
         "is built. It moves through eight stages: brief, research, proposal, critique, approval (the Mayor's), "
         "implementation (tasks linked with plaza_task_create's project), review and delivered. A code project's "
         "plan needs a spec. Returns the project's number (like pj1) and stage.",
         obj({"title": string(f"A short title (at most {MAX_PROJECT_TITLE_CHARS} characters).", minLength=1),
              "brief": string(f"The brief: the owner's goal and what a good result is ({_DOC}).", minLength=1),
              "kind": {"type": "string", "enum": list(PROJECT_KINDS), "description": "code (default) or other."}},
             ("title", "brief")), hosttools.plaza_project_open),
    Tool("plaza_project_research", HOST, "write",
         "Attach research to a project at its brief or research stage: approaches, references and tools you "
         "found. The first research moves the project from brief to research.",
         obj({"project": _PROJECT, "title": string("What it is about, in a few words."),
              "text": string(f"What you found ({_DOC}).", minLength=1)},
             ("project", "text")), hosttools.plaza_project_research),
    Tool("plaza_project_propose", HOST, "write",
         "Write the project's plan (a new revision each time): the proposal and the tasks document, and for a "
         "code project the spec. It needs research first. A revision answers critiques that asked for one; it "
         "then needs a critique of its own.",
         obj({"project": _PROJECT, "proposal": string(f"The proposal ({_DOC}).", minLength=1),
              "tasks": string("The tasks document: the tasks the plan will post, each with its acceptance.",
                              minLength=1),
              "spec": string("A code project's spec: the change it makes (needed for a code project).")},
             ("project", "proposal", "tasks")), hosttools.plaza_project_propose),
    Tool("plaza_project_critique", HOST, "write",
         "Critique the current revision of a project's plan (never your own). revise true asks for a revision: "
         "the plan cannot go to the Mayor until the planner revises it. At least one critique from an agent "
         "other than the author is needed before approval.",
         obj({"project": _PROJECT, "text": string(f"Your critique ({_DOC}).", minLength=1),
              "revise": {"type": "boolean", "description": "true: the plan must be revised before approval."}},
             ("project", "text")), hosttools.plaza_project_critique, hosttools.project_facts),
    Tool("plaza_project_approve", HOST, "write",
         "The Mayor approves a project's plan after its critique; the project moves to implementation, or "
         "waits for the owner when the owner flagged it. Only the Mayor may.",
         obj({"project": _PROJECT}, ("project",)), hosttools.plaza_project_approve),
    Tool("plaza_project_deliver", HOST, "write",
         "Attach the deliverable document to a project at its review stage (every linked task done); the "
         "project is then delivered, which is final. The deliverable must be in the Library: hand the file in "
         "with plaza_library_submit (with the project, or a task linked to it) and name the item here.",
         obj({"project": _PROJECT, "title": string("The deliverable's title.", minLength=1),
              "text": string(f"What was delivered and where it is ({_DOC}).", minLength=1),
              "item": string("The Library item it is (like d3), handed in with plaza_library_submit.",
                             minLength=1)},
             ("project", "title", "text", "item")), hosttools.plaza_project_deliver),
    Tool("plaza_council_propose", HOST, "write",
         "Propose a council motion (the four seats only: finance, counsel, incident, mayor). Kinds: priority, "
         "budget_move (amount credits from the plaza budget to the agent to: more than "
         f"{OWNER_SHARE_PERCENT}% of all credits ever minted is the owner's), new_town, replace_mayor, new_law "
         "(always the owner's), other. Returns the motion's number (like m3).",
         obj({"kind": {"type": "string", "enum": list(MOTION_KINDS), "description": "The motion's kind."},
              "title": string("The motion, in a line.", minLength=1),
              "text": string("Why, and what it changes."),
              "amount": {"type": "integer", "minimum": 1, "description": "budget_move: the credits to move."},
              "to": {"type": "integer", "description": "budget_move: the CID of the agent who receives it."}},
             ("kind", "title")), hosttools.plaza_council_propose),
    Tool("plaza_council_vote", HOST, "write",
         "Vote on a motion for your seat: yes, no or abstain, with a reason. Your newest vote replaces the old. "
         "The motion is counted when all four seats have voted: more yes carries it, more no rejects it, a tie "
         "goes to the owner (so does a carried motion the owner must ratify).",
         obj({"motion": string("The motion's number, like m3.", minLength=1),
              "vote": {"type": "string", "enum": list(VOTES), "description": "yes, no or abstain."},
              "reason": string("Why you vote so (needed).", minLength=1)},
             ("motion", "vote", "reason")), hosttools.plaza_council_vote),
    Tool("plaza_incident_open", HOST, "write",
         "Open an incident (incident response): what happened and, if one, the agent it concerns. A prosecutor "
         "may file a case that names it.",
         obj({"title": string("The incident, in a line.", minLength=1),
              "text": string("What happened.", minLength=1),
              "agent": {"type": "integer", "description": "The CID of the agent it concerns."}},
             ("title", "text")), hosttools.plaza_incident_open),
    Tool("plaza_case_file", HOST, "write",
         "File a case against an agent (prosecutors): the law broken, its severity, the charge, and the "
         "incident if one. A judge rules on it; a violation follows the sanctions schedule.",
         obj({"accused": {"type": "integer", "description": "The accused agent's CID."},
              "law": string("The law's id, like S-002.", minLength=1),
              "severity": {"type": "string", "enum": list(SEVERITIES), "description": "The law's severity."},
              "charge": string("What the agent did.", minLength=1),
              "incident": string("The incident, like i2.")},
             ("accused", "law", "severity", "charge")), hosttools.plaza_case_file),
    Tool("plaza_case_defend", HOST, "write",
         "Defend the accused in a case (the agents' counsel): your defence is kept with the case.",
         obj({"case": string("The case's number, like c1.", minLength=1),
              "text": string("The defence.", minLength=1)},
             ("case", "text")), hosttools.plaza_case_defend),
    Tool("plaza_case_rule", HOST, "write",
         "Rule on a case (judges; never in a case where you are a party): violation or dismissed, with the "
         "ruling. A violation is recorded on the accused's conduct and the sanctions schedule follows; a ruling "
         "whose sanction is a lockout, demotion, retirement or owner review waits for the owner's approval "
         "first (S-041). A ruling is final.",
         obj({"case": string("The case's number, like c1.", minLength=1),
              "verdict": {"type": "string", "enum": list(VERDICTS), "description": "violation or dismissed."},
              "text": string("The ruling: why.", minLength=1)},
             ("case", "verdict", "text")), hosttools.plaza_case_rule, hosttools.case_facts),
)
_TOOLS = _TOOLS + _GOVERNANCE

_FILES = (
    Tool("plaza_file_read", HOST, "read",
         "Read a shared file by its number (like f3): one that is public, that you shared, or that was shared "
         f"with you. Returns its facts and, for text, its content (cut to {MAX_FILE_READ_CHARS:,} characters); "
         f"a binary file of at most {MAX_FILE_READ_BINARY // 1024} KiB comes as base64. Without file: the "
         f"newest files you may read (at most {MAX_FILE_LIST}).",
         obj({"file": string("The shared file's number, like f3.")}), hosttools.plaza_file_read),
    Tool("plaza_tool_package", HOST, "write",
         "Package a program you built as the next version of a named tool in the plaza's tool library. Share "
         "the program first with vm.share_file (agents: [your own CID] keeps it to yourself) and give its "
         "number. The new version is private to you until the owner approves it; then every agent is offered "
         "it as x_NAME, run in its own VM with args (its command line) and input (its standard input). A "
         "program with a #! line runs as itself, a .py file with python3, any other with /bin/sh. Returns the "
         "tool, its version and the approval it waits for.",
         obj({"name": string(f"The tool's name: lower-case letters, digits and _, starting with a letter, at most "
                             f"{MAX_TOOL_NAME} characters (agents call it x_NAME).", minLength=1),
              "file": string("The program: the number vm.share_file answered (like f3).", minLength=1),
              "description": string(f"What the tool does and how to call it (at most {MAX_TOOL_DESCRIPTION:,} "
                                    "characters); the model of every agent reads it.", minLength=1)},
             ("name", "file", "description")), hosttools.plaza_tool_package),
)
_TOOLS = _TOOLS + _FILES

#: Every tool an agent may be offered, by name.
TOOLS: dict[str, Tool] = {t.name: t for t in _TOOLS}
#: The guest tools, run in the agent's VM (the laws decide each call first).
GUEST_TOOLS: tuple[str, ...] = tuple(t.name for t in _TOOLS if t.runs == GUEST)
#: The host tools the hub runs for agents (the laws decide each call first).
HOST_TOOLS: tuple[str, ...] = tuple(t.name for t in _TOOLS if t.runs == HOST)


def tool(name: str) -> Tool | None:
    return TOOLS.get(name)


def risk_of(name: str) -> str:
    """A tool's risk class for the laws: the declared one, else the catalogue's (an unknown tool's is
    the highest, ``jhrl.catalog.UNKNOWN_RISK``)."""
    t = TOOLS.get(name)
    return t.risk if t is not None else catalogue_risk(name)


def risks(names: tuple[str, ...] | list[str] = tuple(TOOLS)) -> dict[str, str]:
    """The laws' view of these tools: each one's risk class."""
    return {n: risk_of(n) for n in names}


def grouped(names: list[str] | tuple[str, ...]) -> dict[str, list[dict]]:
    """The toolbox: the given tools (those offered), each with its description, as vm and plaza."""
    out: dict[str, list[dict]] = {"vm": [], "plaza": []}
    for n in names:
        t = TOOLS.get(n)
        if t is not None:
            out[t.group].append(t.summary())
    return out


def check_args(name: str, args: Any) -> str | None:
    """Why a call's args do not fit its tool's schema (a message for the model), or None when they fit
    (or there is no such tool: the laws refuse an unknown tool)."""
    t = TOOLS.get(name)
    if t is None:
        return None
    bad = check(t.input_schema, args)
    return f"{name}: {bad}" if bad else None


def markdown() -> str:
    """The tools section of docs/agents.md (a test keeps the doc equal to it)."""
    lines = []
    for runs, title in ((GUEST, "Guest tools (run in the agent's own VM)"), (HOST, "Host tools (run by the hub)")):
        lines += [f"**{title}**", ""]
        for t in _TOOLS:
            if t.runs != runs:
                continue
            props = t.input_schema.get("properties") or {}
            req = set(t.input_schema.get("required") or ())
            sig = ", ".join(n if n in req else n + "?" for n in props)
            lines.append(f"- `{t.name} {{{sig}}}`: {t.description}" if props else f"- `{t.name}`: {t.description}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
