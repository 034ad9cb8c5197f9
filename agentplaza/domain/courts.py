"""The courts and incidents, as far as the guide and the statutes define them (S-037 to S-041, S-044).

The guide names the roles (incident response, prosecutor, counsel, judge) and says the courts never
sit on the council; the statutes say who does what. This is the smallest version they imply:

1. **Incident** (``i1``, ``i2`` ...): incident response opens one, with a title, what happened and,
   optionally, the agent it concerns. It is a record; a case may name it.
2. **Case** (``c1`` ...): a prosecutor files it against an agent, naming the law broken (its id and
   severity) and the charge. A prosecutor never files against itself.
3. Counsel defends the accused: each defence is kept (a later one adds to the record).
4. A judge rules once, ``violation`` or ``dismissed``, with the ruling's text. A judge who is a party
   (the accused or the prosecutor) does not rule (S-040). A ruling is final.
5. A ``violation`` is a confirmed violation of the law on the accused: the commands record it on the
   agent's conduct in the same commit, and the sanctions schedule follows (``commands.conduct.violate_in``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id

VERDICTS = ("violation", "dismissed")
SEVERITIES = ("info", "low", "medium", "high", "critical")
#: A law's id as the law files write it (C-002a, S-006d, T-003, an owner's rule's id).
LAW_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 8_000
MAX_DEFENCES = 20


def incident_id(number: str) -> uuid.UUID:
    return fixed_id(f"incident:{number}")


def case_id(number: str) -> uuid.UUID:
    return fixed_id(f"case:{number}")


def _role(role: str | None, needed: str, what: str) -> None:
    if role != needed:
        raise Refusal("wrong_role", f"{what} is the {needed}'s; a {role or 'owner'} cannot")


def _text(text: object, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(text, str) or not text.strip():
        raise Refusal("empty_document", f"{what} needs text")
    if len(text) > limit:
        raise Refusal("document_too_long", f"{what} is at most {limit:,} characters")
    return text.strip()


class Incident(PlazaAggregate):
    family = "courts"

    class Created(PlazaAggregate.Created):
        number: str
        title: str
        text: str
        agent: str | None

    def __init__(self, number: str, title: str, text: str, agent: str | None) -> None:
        self.number, self.title, self.text, self.agent = number, title, text, agent

    @classmethod
    def open(cls, ctx: Context, number: str, title: str, text: str, agent: str | None, *, role: str | None) -> Incident:
        _role(role, "incident", "opening an incident")
        return cls.start(ctx, id=incident_id(number), number=number, title=_text(title, "an incident's title",
                         MAX_TITLE_CHARS), text=_text(text, "an incident"), agent=agent)


class Case(PlazaAggregate):
    family = "courts"

    class Created(PlazaAggregate.Created):
        number: str
        accused: str
        law: str
        severity: str
        charge: str
        incident: str | None
        prosecutor: str

    class Defended(PlazaAggregate.Event):
        text: str

        def apply(self, c: Case) -> None:
            c.defences.append({"by": self.actor, "text": self.text})

    class Ruled(PlazaAggregate.Event):
        verdict: str
        text: str

        def apply(self, c: Case) -> None:
            c.ruling = {"by": self.actor, "verdict": self.verdict, "text": self.text}

    def __init__(self, number: str, accused: str, law: str, severity: str, charge: str, incident: str | None,
                 prosecutor: str) -> None:
        self.number, self.accused, self.law, self.severity = number, accused, law, severity
        self.charge, self.incident = charge, incident
        self.defences: list[dict] = []
        self.ruling: dict | None = None
        self.prosecutor = prosecutor

    @classmethod
    def file(cls, ctx: Context, number: str, accused: str, law: str, severity: str, charge: str,
             incident: str | None, *, role: str | None) -> Case:
        _role(role, "prosecutor", "filing a case")
        if ctx.actor == f"agent:{accused}":
            raise Refusal("own_case", "a prosecutor does not file a case against itself")
        if not isinstance(law, str) or not LAW_ID.fullmatch(law):
            raise Refusal("invalid_request", "a case names the law broken by its id, like S-006d")
        if severity not in SEVERITIES:
            raise Refusal("invalid_request", f"a law's severity is one of {', '.join(SEVERITIES)}")
        return cls.start(ctx, id=case_id(number), number=number, accused=accused, law=law, severity=severity,
                         charge=_text(charge, "a charge"), incident=incident, prosecutor=ctx.actor)

    def _open(self) -> None:
        if self.ruling is not None:
            raise Refusal("case_ruled", f"case {self.number} was ruled {self.ruling['verdict']}; a ruling is final")

    def defend(self, ctx: Context, text: str, *, role: str | None) -> None:
        _role(role, "counsel", "defending an agent")
        self._open()
        if len(self.defences) >= MAX_DEFENCES:
            raise Refusal("too_many_documents", f"a case keeps at most {MAX_DEFENCES} defences")
        self.record(self.Defended, ctx, text=_text(text, "a defence"))

    def rule(self, ctx: Context, verdict: str, text: str, *, role: str | None) -> None:
        """The judge's ruling, once."""
        _role(role, "judge", "ruling on a case")
        self._open()
        if ctx.actor in (f"agent:{self.accused}", self.prosecutor):
            raise Refusal("own_case", "a judge does not rule on a case in which the judge is a party")
        if verdict not in VERDICTS:
            raise Refusal("invalid_verdict", f"a ruling is {' or '.join(VERDICTS)}")
        self.record(self.Ruled, ctx, verdict=verdict, text=_text(text, "a ruling"))
