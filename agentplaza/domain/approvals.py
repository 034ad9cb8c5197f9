"""The approvals queue: one queue of what waits for the owner, each item with a kind.

An ``Approval`` is requested with its kind, a title a person reads, the agent it concerns, a
reference to the thing it decides (a held payment, a suspension, a call's digest ...) and the
details the owner needs.  The owner approves or denies it, with a reason; each decision is an
event and is final.  An approved ask-mode call is used once, with its exact input: ``Used``.

``ApprovalRef`` points from the thing an approval decides (``payment:ID``, ``call:CID:DIGEST``)
to the approval's number, so the treasury's old routes and an agent re-running the approved
call find it without a scan.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ..wire import APPROVAL_KINDS, APPROVAL_STATUSES
from .agents import check_count, check_model
from .base import Context, PlazaAggregate, Refusal, _validator_for, fixed_id
from .names import known_role

#: Each kind (named in ``wire``) with what it is.
KINDS = dict(zip(APPROVAL_KINDS, (
    "a call from an agent in ask mode",
    "a payment above the threshold",
    "a sanction step that needs you",
    "a new agent the orchestrator proposes",
    "a project marked for your approval",
    "a council motion given to you",
    "a new version of a library tool",
), strict=True))
STATUSES = APPROVAL_STATUSES
MAX_TITLE_CHARS = 300
#: A payment's id in an approval's ``detail.payment``: its UUID in hex.
PAYMENT_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


def approval_id(number: str) -> uuid.UUID:
    return fixed_id(f"approval:{number}")


def ref_id(ref: str) -> uuid.UUID:
    return fixed_id(f"approval-ref:{ref}")


def detail_problem(kind: str, detail: Any) -> str | None:
    """What is missing or wrong in the ``detail`` of a kind whose approval acts (None: nothing).

    - agent: ``role`` (a role of the society), ``count`` (1 to 16, default 1), ``model`` (provider/model or null);
      approving starts them.
    - payment: ``payment``, the held payment's id; approving makes the transfer.
    Other kinds only record their decision: any detail will do."""
    if not isinstance(detail, dict):
        return "detail: an approval's detail is an object"
    if kind == "agent":
        role, count, model = detail.get("role"), detail.get("count", 1), detail.get("model")
        if not isinstance(role, str):
            return "detail.role: an agent proposal names the role to start"
        if model is not None and not isinstance(model, str):
            return "detail.model: a model is named provider/model"
        for field, check in (("role", lambda: known_role(role)), ("count", lambda: check_count(count)),
                             ("model", lambda: check_model(model))):
            try:
                check()
            except Refusal as r:
                return f"detail.{field}: {r.message}"
    elif kind == "payment":
        if not isinstance(detail.get("payment"), str) or not PAYMENT_ID_PATTERN.fullmatch(detail["payment"]):
            return "detail.payment: a payment approval names the held payment's id (32 hex digits)"
    return None


class Approval(PlazaAggregate):
    family = "approvals"

    class Requested(PlazaAggregate.Created):
        number: str
        kind: str
        title: str
        agent: str | None
        ref: str | None
        detail: dict[str, Any]

    class Approved(PlazaAggregate.Event):
        def apply(self, a: Approval) -> None:
            a.status = "approved"

    class Denied(PlazaAggregate.Event):
        def apply(self, a: Approval) -> None:
            a.status = "denied"

    class Used(PlazaAggregate.Event):
        """An approved call ran, once, with its exact input (the digest)."""

        digest: str

        def apply(self, a: Approval) -> None:
            a.used = True

    def __init__(self, number: str, kind: str, title: str, agent: str | None, ref: str | None,
                 detail: dict[str, Any]) -> None:
        self.number, self.kind, self.title, self.agent, self.ref = number, kind, title, agent, ref
        self.detail = detail
        self.status = "pending"
        self.used = False

    @classmethod
    def request(cls, ctx: Context, number: str, kind: str, title: str, *, agent: str | None = None,
                ref: str | None = None, detail: dict[str, Any] | None = None) -> Approval:
        if kind not in KINDS:
            raise Refusal("invalid_kind", f"an approval's kind is one of {', '.join(KINDS)}")
        title = (title or "").strip()
        if not title or len(title) > MAX_TITLE_CHARS:
            raise Refusal("invalid_request", f"an approval needs a title of at most {MAX_TITLE_CHARS} characters")
        problem = detail_problem(kind, {} if detail is None else detail)
        if problem is not None:
            raise Refusal("invalid_detail", problem)
        payload = dict(number=number, kind=kind, title=title, agent=agent, ref=ref, detail=dict(detail or {}),
                       actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
        _validator_for(cls.Requested)(payload)
        return cls._create(cls.Requested, id=approval_id(number), timestamp=ctx.at, **payload)

    def _pending(self) -> None:
        if self.status != "pending":
            raise Refusal("approval_decided", f"approval {self.number} was already {self.status}; a decision is final")

    def approve(self, ctx: Context) -> None:
        self._pending()
        self.check_actable()
        self.record(self.Approved, ctx)

    def check_actable(self) -> None:
        """An approval whose detail could not act (one written before details were checked) is refused
        approval, clearly; it can still be denied, and a denial does nothing besides recording itself."""
        problem = detail_problem(self.kind, self.detail)
        if problem is not None:
            raise Refusal("invalid_detail", f"approval {self.number} cannot be approved: {problem}; deny it")

    def deny(self, ctx: Context) -> None:
        self._pending()
        self.record(self.Denied, ctx)

    def use(self, ctx: Context, agent: str, digest: str) -> None:
        """Run an approved call: once, by its agent, with its exact input."""
        if self.kind != "call":
            raise Refusal("not_a_call", f"approval {self.number} is not a call")
        if self.agent != agent:
            raise Refusal("approval_mismatch", f"approval {self.number} is for agent {self.agent}, not {agent}")
        if self.detail.get("digest") != digest:
            raise Refusal("approval_mismatch",
                          f"approval {self.number} is for another input: an approved call runs only with its exact input")
        if self.status != "approved":
            raise Refusal(f"approval_{self.status}", f"approval {self.number} is {self.status}")
        if self.used:
            raise Refusal("approval_used", f"approval {self.number} was already used: an approved call runs once")
        self.record(self.Used, ctx, digest=digest)


class ApprovalRef(PlazaAggregate):
    """Which approval decides a thing (``payment:ID``, ``call:CID:DIGEST``, ``suspension:CID:S``)."""

    family = "approvals"

    class Created(PlazaAggregate.Created):
        ref: str
        number: str

    class Pointed(PlazaAggregate.Event):
        number: str

        def apply(self, r: ApprovalRef) -> None:
            r.number = self.number

    def __init__(self, ref: str, number: str) -> None:
        self.ref, self.number = ref, number

    @classmethod
    def point(cls, ctx: Context, existing: ApprovalRef | None, ref: str, number: str) -> ApprovalRef:
        if existing is None:
            return cls.start(ctx, id=ref_id(ref), ref=ref, number=number)
        existing.record(cls.Pointed, ctx, number=number)
        return existing
