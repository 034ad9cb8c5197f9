"""Contacts, opinions and reputation, computed from the society's facts at a time ``now``.

The facts (``Fact``) are what the log holds: interactions between two agents (a message; a task one
did and the other reviewed, passed or failed), agents' ratings of each other (the ones that count),
and the owner's ratings. Every weight fades with age from ``now``, so the same facts at another time
give the society as it was (or will be) then.

- **Contact** (a, b): strength 1 right after an interaction, fading to 0 over ``CONTACT_FADE_DAYS``.
- **Opinion** (i of j): evidence for and against j, from j's work that i reviewed (a pass is one for,
  a fail one against) and from i's ratings of j (a rating of value v is v for and 1 - v against), each
  fading to 0 over ``OPINION_FADE_DAYS``. Trust is (for + 1) / (for + against + 2), between 0 and 1;
  confidence is n / (n + ``CONFIDENCE_K``) with n the evidence.
- **Reputation** (j), 0 to 100: the evidence on j weighed by who gives it. The owner's ratings weigh
  ``OWNER_WEIGHT`` each; the plaza's own record weighs one per task of j's that ended (done for,
  failed against); each agent i adds its opinion of j (trust, times its confidence) weighed by i's
  own standing, which is i's reputation (0 while i is unrated). Standing starts at 0 for everyone
  and is refined ``ITERATIONS`` times, so trust flows only from the owner's ratings and from work that
  passed review: an agent that trusted agents trust scores higher, and a ring of agents nobody else
  trusts lends itself nothing. Below ``EVIDENCE_THRESHOLD`` of weighed evidence an agent is unrated.

Pure: no I/O, no clock (``now`` is given).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

#: A contact fades to nothing over about two weeks without contact.
CONTACT_FADE_DAYS = 14
#: An opinion fades to nothing over about 90 days if nothing renews it.
OPINION_FADE_DAYS = 90
#: The owner's rating counts this many times an agent's.
OWNER_WEIGHT = 12.0
#: Confidence n / (n + K): with K = 3, three pieces of evidence make an opinion half sure.
CONFIDENCE_K = 3.0
#: Weighed evidence below this leaves an agent "unrated".
EVIDENCE_THRESHOLD = 2.5
#: Refinements of the standing (the trust of trusted agents) per computation.
ITERATIONS = 8
UNRATED = "unrated"


@dataclass(frozen=True)
class Fact:
    """One fact of the society. kind: ``message`` (a, b), ``work`` (worker a reviewed by b, passed),
    ``rating`` (a rated b with value), ``owner`` (the owner rated b: passed is up)."""

    kind: str
    at: dt.datetime
    a: int | None
    b: int
    value: float = 0.0
    passed: bool | None = None


def fade(at: dt.datetime, now: dt.datetime, days: float) -> float:
    """1 at ``now``, falling linearly to 0 ``days`` later; a fact after ``now`` is not yet there (0)."""
    age = (now - at).total_seconds() / 86_400
    if age < 0:
        return 0.0
    return max(0.0, 1.0 - age / days)


def contacts(facts: Iterable[Fact], now: dt.datetime) -> dict[tuple[int, int], dict]:
    """Every pair that interacted: its strength now, its interactions and the last one's time."""
    out: dict[tuple[int, int], dict] = {}
    for f in facts:
        if f.kind not in ("message", "work") or f.a is None or f.at > now:
            continue
        key = (min(f.a, f.b), max(f.a, f.b))
        c = out.setdefault(key, {"interactions": 0, "last": f.at})
        c["interactions"] += 1
        c["last"] = max(c["last"], f.at)
    for c in out.values():
        c["strength"] = round(fade(c["last"], now, CONTACT_FADE_DAYS), 4)
    return out


@dataclass
class Evidence:
    pos: float = 0.0
    neg: float = 0.0

    @property
    def n(self) -> float:
        return self.pos + self.neg

    @property
    def trust(self) -> float:
        return (self.pos + 1.0) / (self.n + 2.0)

    @property
    def confidence(self) -> float:
        return self.n / (self.n + CONFIDENCE_K)


NONE = Evidence()


def gather(facts: Iterable[Fact], now: dt.datetime) -> tuple[dict, dict, dict]:
    """(opinions (i, j) -> Evidence, the plaza's record j -> Evidence, the owner's j -> Evidence)."""
    opinions: dict[tuple[int, int], Evidence] = defaultdict(Evidence)
    plaza: dict[int, Evidence] = defaultdict(Evidence)
    owner: dict[int, Evidence] = defaultdict(Evidence)
    for f in facts:
        w = fade(f.at, now, OPINION_FADE_DAYS)
        if w <= 0:
            continue
        if f.kind == "work" and f.a is not None:
            for e in (opinions[(f.b, f.a)], plaza[f.a]):
                if f.passed:
                    e.pos += w
                else:
                    e.neg += w
        elif f.kind == "rating" and f.a is not None:
            e = opinions[(f.a, f.b)]
            e.pos += w * f.value
            e.neg += w * (1.0 - f.value)
        elif f.kind == "owner":
            e = owner[f.b]
            if f.passed:
                e.pos += w * OWNER_WEIGHT
            else:
                e.neg += w * OWNER_WEIGHT
    return opinions, plaza, owner


def reputation(facts: Iterable[Fact], now: dt.datetime, agents: Iterable[int] = ()) -> dict[int, dict]:
    """Each agent's score (0 to 100, or None while unrated) and the weighed evidence behind it."""
    opinions, plaza, owner = gather(facts, now)
    everyone = set(agents) | set(plaza) | set(owner) | {j for _, j in opinions} | {i for i, _ in opinions}
    by_subject: dict[int, list[tuple[int, float, float]]] = defaultdict(list)  # j -> (i, for, against)
    for (i, j), e in opinions.items():
        c, t = e.confidence, e.trust
        by_subject[j].append((i, c * t, c * (1.0 - t)))
    standing = dict.fromkeys(everyone, 0.0)
    result: dict[int, dict] = {}
    for _ in range(ITERATIONS):
        nxt = {}
        for j in everyone:
            mine, owners = plaza.get(j, NONE), owner.get(j, NONE)
            pos, neg = mine.pos + owners.pos, mine.neg + owners.neg
            for i, yes, no in by_subject.get(j, ()):
                s = standing[i]
                if s > 0:
                    pos += s * yes
                    neg += s * no
            evidence = pos + neg
            score = (pos + 1.0) / (evidence + 2.0) if evidence >= EVIDENCE_THRESHOLD else None
            nxt[j] = score or 0.0
            result[j] = {"score": None if score is None else round(100 * score), "evidence": round(evidence, 3)}
        standing = nxt
    return result


def opinion_rows(facts: Iterable[Fact], now: dt.datetime) -> list[dict]:
    """Every opinion now: who of whom, trust and confidence."""
    opinions, _, _ = gather(facts, now)
    return [{"of": j, "by": i, "trust": round(e.trust, 4), "confidence": round(e.confidence, 4)}
            for (i, j), e in sorted(opinions.items())]
