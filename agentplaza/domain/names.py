"""The plaza's names for things, each defined once: roles, CIDs and the short numbers people type.

- A role *known to the fleet* is one of the 17 roles of the society (``jhrl.catalog.ROLES``,
  ``agentplaza society roles``). An agent is spawned with one; a task names one or none; a worker
  (an agent, as the scheduler sees it) has one. ``known_role`` is that check: a task for ``buildr``
  would wait for an agent no one can ever start.
- A *role name* is any name of the role pattern: a lower-case letter, then lower-case letters,
  digits, ``-`` or ``_``, at most ``MAX_ROLE_CHARS`` in all. A law may name any role (the owner may
  define roles of their own; the guide, "Roles"), and so may the model policy's per-role settings and
  a decision replayed with ``rules check``. ``role_name`` is that check.
- A CID, as the plaza's records hold it (a string; the agents' own are numbers): 1 to
  ``MAX_CID_CHARS`` letters, digits, ``.``, ``-`` or ``_``. ``check_cid``.
- The short numbers: tasks ``t1``, ``t2`` ...; approvals ``a1``, ``a2`` ... (a bare number takes the
  prefix). ``task_number``, ``approval_number``.

Every pattern here is matched whole (``fullmatch``, never ``match`` with ``$``, which lets a trailing
newline through): ``"worker\\n"`` is no role. A CID and a short number are taken without the spaces
around them (``" 7 "`` is CID ``7``); a role is taken as given.
"""

from __future__ import annotations

import re

from jhrl.catalog import ROLES

from .base import Refusal

#: The longest role name (a law's, a policy's or one of the fleet's).
MAX_ROLE_CHARS = 64
ROLE_PATTERN = re.compile(rf"[a-z][a-z0-9_-]{{0,{MAX_ROLE_CHARS - 1}}}")
#: The longest CID the records hold.
MAX_CID_CHARS = 64
CID_PATTERN = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_CID_CHARS}}}")
#: Tasks are t1, t2 ...; approvals a1, a2 ...
TASK_PREFIX, APPROVAL_PREFIX = "t", "a"
#: Board posts are p1, p2 ... (``domain.board``).
POST_PREFIX = "p"
#: Projects pj1 ..., council motions m1 ..., court cases c1 ..., incidents i1 ... (the guide: "m3").
PROJECT_PREFIX, MOTION_PREFIX, CASE_PREFIX, INCIDENT_PREFIX = "pj", "m", "c", "i"
#: The most digits a short number has.
MAX_NUMBER_DIGITS = 18
_NUMBER = re.compile(rf"[1-9][0-9]{{0,{MAX_NUMBER_DIGITS - 1}}}")
_KNOWN = frozenset(ROLES)


# -- roles -------------------------------------------------------------------------------------------

def is_role_name(role: object) -> bool:
    return isinstance(role, str) and ROLE_PATTERN.fullmatch(role) is not None


def role_name(role: object) -> str:
    """Any role a law (or the policy) may name; refused ``invalid_role`` when it is no role name."""
    if not is_role_name(role):
        raise Refusal("invalid_role", f"a role is a lower-case letter, then lower-case letters, digits, - and _ "
                      f"(at most {MAX_ROLE_CHARS}); {role!r} is not one")
    return role  # type: ignore[return-value]


def known_role(role: object) -> str:
    """A role of the fleet (an agent's, a task's, a worker's): ``invalid_role`` when missing or no role
    name, ``unknown_role`` (naming the roles) when no agent can ever have it."""
    if role is None or role == "":
        raise Refusal("invalid_role", "a role is required")
    name = role_name(role)
    if name not in _KNOWN:
        raise Refusal("unknown_role", f"no role {name!r}: the {len(ROLES)} roles are {', '.join(ROLES)} "
                      "(agentplaza society roles)")
    return name


def known_role_or_none(role: object) -> str | None:
    """A task may name no role (any worker takes it): None or "" is none, anything else ``known_role``."""
    return None if role is None or role == "" else known_role(role)


# -- CIDs ---------------------------------------------------------------------------------------------

def check_cid(cid: object, what: str = "an agent") -> str:
    """A CID as the records hold it (a number is taken as its digits; spaces around are dropped)."""
    text = str(cid).strip() if isinstance(cid, (str, int)) and not isinstance(cid, bool) else ""
    if not CID_PATTERN.fullmatch(text):
        raise Refusal("invalid_cid", f"{what}'s CID is 1 to {MAX_CID_CHARS} letters, digits, '-', '_' or '.'")
    return text


# -- the short numbers --------------------------------------------------------------------------------

def short_number(prefix: str, value: object) -> str | None:
    """``value`` as the short number with ``prefix`` ("7" and "t7" give "t7"), or None if it is none."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    digits = text[len(prefix):] if text.startswith(prefix) else text
    return prefix + digits if _NUMBER.fullmatch(digits) else None


#: Each short number: the refusal for a value that is none of them, and what it numbers.
_NUMBERED = {
    TASK_PREFIX: ("no_task", "task", "tasks"),
    APPROVAL_PREFIX: ("no_approval", "approval", "approvals"),
    POST_PREFIX: ("no_post", "post", "posts"),
    PROJECT_PREFIX: ("no_project", "project", "projects"),
    MOTION_PREFIX: ("no_motion", "motion", "motions"),
    CASE_PREFIX: ("no_case", "case", "cases"),
    INCIDENT_PREFIX: ("no_incident", "incident", "incidents"),
}


def _numbered(prefix: str, value: object) -> str:
    number = short_number(prefix, value)
    if number is None:
        code, noun, plural = _NUMBERED[prefix]
        raise Refusal(code, f"no {noun} {str(value).strip()!r}; {plural} are numbered {prefix}1, {prefix}2 ...")
    return number


def task_number(value: object) -> str:
    return _numbered(TASK_PREFIX, value)


def approval_number(value: object) -> str:
    return _numbered(APPROVAL_PREFIX, value)


def post_number(value: object) -> str:
    return _numbered(POST_PREFIX, value)


def project_number(value: object) -> str:
    return _numbered(PROJECT_PREFIX, value)


def motion_number(value: object) -> str:
    return _numbered(MOTION_PREFIX, value)


def case_number(value: object) -> str:
    return _numbered(CASE_PREFIX, value)


def incident_number(value: object) -> str:
    return _numbered(INCIDENT_PREFIX, value)
