"""A tool call as the laws see it, and the decision they reach on it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

RISKS = ("read", "write", "irreversible")
MODES = ("autonomous", "ask", "read-only")  # an agent's permission mode
AGENT_TIERS = ("orchestrator", "worker")
EFFECTS = ("allow", "deny", "ask")

# Why a decision came out as it did. Only FORBIDDEN is misconduct.
FORBIDDEN = "forbidden"  # a preventive forbid matched: refused, and a violation
DEFAULT_DENY = "default_deny"  # no law permits the call: refused, not misconduct
READ_ONLY_MODE = "read_only_mode"  # the agent is read-only and the call changes something
ASK_MODE = "ask_mode"  # the agent is in ask mode and the call changes something
ASK_LAW = "ask_law"  # an `ask` law matched
PERMITTED = "permitted"
READ = "read"  # a read tool passes at every permission level unless forbidden

_RISKS, _MODES, _TIERS = frozenset(RISKS), frozenset(MODES), frozenset(AGENT_TIERS)
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Call:
    """One tool call: who makes it, which tool, how risky, with what arguments.

    `approved` is true only when the owner approved this exact call (same tool, same input).
    """

    role: str
    action: str
    risk: str = "read"
    tier: str = "worker"
    mode: str = "autonomous"
    args: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, hash=False)
    approved: bool = False

    def __post_init__(self):
        if self.risk not in _RISKS:
            raise ValueError(f"unknown risk class {self.risk!r} (one of {', '.join(RISKS)})")
        if self.mode not in _MODES:
            raise ValueError(f"unknown permission mode {self.mode!r} (one of {', '.join(MODES)})")
        if self.tier not in _TIERS:
            raise ValueError(f"unknown agent tier {self.tier!r} (one of {', '.join(AGENT_TIERS)})")

    def digest(self) -> str:
        """SHA-256 of the tool and its input: what an approval of "this exact call" is bound to.

        It is the same for the same arguments in any order, and it keeps no argument value readable.
        """
        body = json.dumps([self.action, dict(self.args)], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=repr)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Decision:
    """What the laws decided on one call.

    effect: allow, deny or ask (held for the owner's approvals).
    reason: one of the reason codes above.
    matched: every law whose actions and condition matched, in law order.
    forbidding: the preventive forbid that refused the call, if one did.
    violation: a forbid matched (preventive, detective or judgment): misconduct to record.
    recorded: detective and judgment forbids that matched; they let the call run and record it.
    """

    effect: str
    reason: str
    matched: tuple[str, ...] = ()
    forbidding: str | None = None
    violation: bool = False
    recorded: tuple[str, ...] = ()
    permits: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.effect == "allow"

    @property
    def refused(self) -> bool:
        return self.effect == "deny"

    @property
    def default_deny(self) -> bool:
        return self.reason == DEFAULT_DENY
