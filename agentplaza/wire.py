"""What a client and the hub must agree on, in one place both import.

The command line (and any other client) imports this module and HTTP, never the domain or the
store; the hub's own modules take the same names from here, so a change is made once. Only
plain values live here: names, states, limits, column lists. The rules that use them stay in
the domain.
"""

from __future__ import annotations

#: The live bus's WebSocket subprotocol (``GET /v1/ws``).
WS_SUBPROTOCOL = "apz.events.v1"
#: The bus's close codes (4000-4999 are the application's): too far behind, idle (the CLI
#: reconnects at once), yielded to a newer socket of the same address, too many sockets.
CLOSE_BEHIND = 4408
CLOSE_IDLE = 4410
CLOSE_YIELDED = 4409
CLOSE_FULL = 4429

# -- the vault ------------------------------------------------------------------------------
#: What a vault entry may be, and what it is when none is named.
VAULT_KINDS = ("api_key", "token", "password", "generic")
DEFAULT_KIND = "api_key"
#: The most lines one vault audit request returns.
AUDIT_MAX_LIMIT = 500
#: The warning ``vault import`` always prints.
DOTENV_WARNING = (
    "warning: .env files are discouraged: the file is plain text, easy to copy by accident, "
    "and does not say which consumer each key is for; delete it once its keys are in the vault"
)

# -- the treasury ---------------------------------------------------------------------------
#: The kinds of journal entry, as the journal shows them.
JOURNAL_KINDS = ("Mint", "Subcontract", "Spend", "Model call", "Payment", "Refund", "Fine", "Transfer", "Bonus")
#: What the wallets list sorts by, and what the payments list filters by ("all": no filter).
WALLET_SORTS = ("balance", "earned", "spent", "name", "role", "cid")
PAYMENT_STATUSES = ("pending", "approved", "denied", "all")

# -- model usage ----------------------------------------------------------------------------
#: What usage may be split on ("agent" is the caller's CID), and its buckets.
USAGE_SPLITS = ("model", "agent", "role", "provider", "route")
USAGE_BUCKETS = ("hour", "day")

# -- the CLI areas models, vault, audit, events, nodes, replay, society, templates ----------
#: A vault entry's scope when it is for every node of the plaza (else it names its nodes).
VAULT_PLAZA_SCOPE = "plaza"

# -- plaza, approvals, tasks, agents, conduct, rules, overview, hub (house-cli-a) ---------------
#: A task's states: what ``tasks list --state`` takes and ``GET /v1/tasks?state=`` checks.
TASK_STATES = ("open", "claimed", "done", "failed", "withdrawn")
#: What an approval decides, and where it stands (``approvals list`` also takes "all": no filter).
APPROVAL_KINDS = ("call", "payment", "sanction", "agent", "project", "motion", "tool_version")
APPROVAL_STATUSES = ("pending", "approved", "denied")
#: An agent's permission mode, a call's risk class and an agent's tier, as ``rules explain``,
#: ``agents mode`` and ``conduct mode`` take them. The rule language (``jhrl.call``, a part that
#: imports nothing of the plaza) names the same; tests/test_wire_cli_areas.py holds them equal.
PERMISSION_MODES = ("autonomous", "ask", "read-only")
RISKS = ("read", "write", "irreversible")
AGENT_TIERS = ("orchestrator", "worker")

# -- the VM console on the live bus (``agentplaza events --all``) ---------------------------
#: The bus family of a line a VM wrote to its serial console. It is not a stored event: it reaches only
#: a socket that asks for it (``/v1/ws?all=1``, or ``console`` among its ``kinds``).
CONSOLE_FAMILY = "console"
#: The longest console line carried; the rest of a longer one is cut.
CONSOLE_LINE_MAX_CHARS = 2000
# -- git and the library (gitlib) ---------------------------------------------------------------
#: What the Library screen and ``library list --type`` filter by: the kind of an item's media type.
LIBRARY_KINDS = ("image", "video", "audio", "pdf", "html", "text", "archive", "other")
# -- The hub as an MCP server (docs/mcp.md) ------------------------------------------------------------------
#: Where the hub answers MCP (streamable HTTP), once the owner turns it on.
MCP_PATH = "/mcp"
#: Every hub MCP token starts so; the hub keeps only its hash.
MCP_TOKEN_PREFIX = "apz_mcp_"
#: A token's one scope; each includes the ones before it.
MCP_SCOPES = ("observe", "operate", "govern")
#: Secure: every request carries a token.  Open: no token runs as an anonymous caller at a chosen scope.
MCP_MODES = ("secure", "open")
#: An allowlist entry naming an agent an editor may drive over ACP: acp:<name or CID>.
ACP_ENTRY_PREFIX = "acp:"
#: Where the hub answers editors over ACP (a WebSocket; ``agentplaza acp`` is the stdio pipe to it).
ACP_PATH = "/acp"
#: The approval modes an editor sees, and the agent's permission mode each one is.
ACP_MODES = {"autonomous": "autonomous", "ask": "ask", "read_only": "read-only"}
#: Where ``agentplaza acp --repo`` says what it pushed of the editor's project, in a request's ``_meta``.
ACP_MIRROR_META = "agentplaza/mirror"
#: The requests before which ``agentplaza acp --repo`` pushes the project (the guide: "Before each session
#: and each prompt").
ACP_MIRRORED = ("session/new", "session/load", "session/resume", "session/prompt")

# -- projects and the council (governance) -------------------------------------------------------
#: A project's eight stages, in order, and its kinds (a code project's plan needs a spec).
PROJECT_STAGES = ("brief", "research", "proposal", "critique", "approval", "implementation", "review", "delivered")
PROJECT_KINDS = ("code", "other")
#: A council motion's kinds, a seat's votes, where a motion stands, and the owner's decision.
MOTION_KINDS = ("priority", "budget_move", "new_town", "replace_mayor", "new_law", "other")
VOTES = ("yes", "no", "abstain")
MOTION_STATUSES = ("open", "waiting", "carried", "rejected")
OWNER_DECISIONS = ("approve", "reject")
