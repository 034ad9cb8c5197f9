"""The 17 roles the plaza ships, and the tool names (with risk classes) the built-in laws are written against.

The hub owns the live tool list (connectors, MCP servers and library tools come and go); it can pass
its own list to `offered_tools` and to the rule book's save warnings. This catalogue is the shipped one.
"""

from __future__ import annotations

# The starting fleet's 17 roles, grouped by what they do.
ROLES = (
    # plans and offices
    "orchestrator", "mayor",
    # the council's other seats: Finance, Legal (agents' counsel), Incident response
    "finance", "counsel", "incident",
    # the courts, which never sit on the council
    "judge", "prosecutor",
    # project work
    "architect", "planner", "researcher", "builder", "reviewer", "tester", "writer", "designer",
    # the Foundry
    "breeder",
    # an E2B sandbox: its own party, judged under this role
    "sandbox",
)

ORCHESTRATOR_TIER_ROLES = ("orchestrator",)


def tier_of(role: str) -> str:
    return "orchestrator" if role in ORCHESTRATOR_TIER_ROLES else "worker"


_GUEST = {
    "vm.read_file": "read", "vm.list_dir": "read", "vm.search": "read", "vm.fetch": "read",
    "vm.write_file": "write", "vm.edit_file": "write", "vm.shell": "write", "vm.download": "write",
    "vm.install": "write", "vm.share_file": "write",
}
_ENGINE = {
    "code_engine": "write", "engine.read": "read", "engine.edit": "write", "engine.exec": "write",
    "engine.fetch": "read", "engine.other": "write",
}
_PLAZA = {
    "plaza_status": "read", "plaza_roster": "read", "plaza_toolbox": "read", "plaza_toolbox_share": "write",
    "plaza_task_list": "read", "plaza_task_create": "write", "plaza_task_assign": "write",
    "plaza_task_cancel": "write", "plaza_task_claim": "write", "plaza_task_submit": "write",
    "plaza_bid": "write", "plaza_hire": "write", "plaza_board_read": "read", "plaza_board_post": "write",
    "plaza_message": "write", "plaza_project_open": "write", "plaza_project_research": "write",
    "plaza_project_propose": "write", "plaza_project_critique": "write", "plaza_project_approve": "write",
    "plaza_project_deliver": "write", "plaza_git": "write", "plaza_git_review": "write",
    "plaza_git_merge": "write", "plaza_library_submit": "write", "plaza_tool_package": "write",
    "plaza_agent_control": "write", "plaza_agent_propose": "write", "plaza_agent_spawn": "write",
    "plaza_council_propose": "write", "plaza_council_vote": "write", "plaza_case_file": "write",
    "plaza_case_rule": "write", "plaza_case_defend": "write", "plaza_incident_open": "write",
    "plaza_treasury_summary": "read", "plaza_treasury_report": "write", "plaza_treasury_mint": "write",
    "plaza_treasury_transfer": "write", "plaza_fine": "write", "plaza_vault_list": "read",
    "plaza_vault_read": "read", "plaza_law_edit": "write", "plaza_sanction": "write",
    "plaza_stop_all": "write", "plaza_resume": "write", "plaza_settings": "write",
    # an agent's own memory ("What an agent is": Memory)
    "plaza_memory_read": "read", "plaza_memory_write": "write", "plaza_memory_delete": "write",
    # the payment tool ("How agents earn and spend"): an agent pays another from its own wallet
    "plaza_pay": "write",
    # the file store: read a shared file by its number
    "plaza_file_read": "read",
}
_FOUNDRY = {
    "foundry_hf_search": "read", "foundry_export": "write", "foundry_job_write": "write",
    "foundry_job_submit": "write", "foundry_results": "read", "foundry_shadow": "write",
    "foundry_gpu_exec": "write", "foundry_promote": "write", "invoke_model": "write",
}
_STATION = {
    "station_list": "read", "station_lease": "write", "station_release": "write",
    "station_screenshot": "read", "station_input": "write", "station_exec": "write", "station_files": "write",
}
_CONNECTORS = {
    "firecrawl_scrape": "read", "unsplash_search": "read", "pexels_search": "read", "pixabay_search": "read",
    "telegram_send": "write", "replicate_predict": "write", "elevenlabs_speak": "write",
    "higgsfield_generate": "write", "magnific_upscale": "write", "github_issue_create": "write",
    "cloudflare_dns_create": "irreversible", "digitalocean_droplet_create": "irreversible",
    "namecheap_domain_register": "irreversible",
}
_OTHER = {"mcp.call": "write", "egress.connect": "write", "egress.inject": "write", "host.exec": "write"}

TOOLS: dict[str, str] = {**_GUEST, **_ENGINE, **_PLAZA, **_FOUNDRY, **_STATION, **_CONNECTORS, **_OTHER}

#: The risk class of a tool this catalogue does not name: the highest, so an unknown tool is never
#: taken for a harmless one (the hub's check refuses it anyway: default deny).
UNKNOWN_RISK = "irreversible"


#: The high-risk class, before which the hub takes an automatic checkpoint of the agent's machine (the
#: owner's ``vm_auto_checkpoints``): every irreversible call, and the guest calls that change the machine
#: beyond what a file edit can show (a shell command, a package install).
HIGH_RISK_CLASSES = ("irreversible",)
HIGH_RISK_TOOLS = ("vm.shell", "vm.install")


def high_risk(tool: str) -> bool:
    return tool in HIGH_RISK_TOOLS or risk_of(tool) in HIGH_RISK_CLASSES


#: The tool library's programs are offered as ``x_<name>`` (the hub's live list holds which); each runs
#: in the calling agent's own VM, so it is a write, like ``vm.shell``.
LIBRARY_TOOL_PREFIX, LIBRARY_TOOL_RISK = "x_", "write"


def risk_of(tool: str) -> str:
    """A tool's risk class: the catalogue's, a library tool's, else ``UNKNOWN_RISK``."""
    if tool not in TOOLS and tool.startswith(LIBRARY_TOOL_PREFIX):
        return LIBRARY_TOOL_RISK
    return TOOLS.get(tool, UNKNOWN_RISK)
