"""AgentPlaza: a hub for AI agents in microVMs."""

import sys

# httpx imports its own command-line client (click, rich and pygments, about 0.1 s of CPU) whenever
# those happen to be installed, and falls back to a stub when they are not; the plaza never runs it,
# and the hub's start and the CLI's every command paid for it (issue 25).  Marking the module absent
# before httpx is first imported takes the stub; a process that imported httpx earlier keeps it whole.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
