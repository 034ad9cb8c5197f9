"""Conversations: the threads between two parties, agents or the owner and an agent.

One ``Conversation`` per pair of parties (its id is the pair's, so a reply lands in the same thread
from either side). An agent's ``plaza_message`` is ``Sent`` here and, in the same commit, told to the
recipient's queue (``commands.conversations``). The owner's own conversation with an agent (the
orchestrator chat is one) is what the owner tells it (``Agent.Told`` by the owner): the read model
folds both into one list of threads.

Rules, in order: a party is the owner or an agent's CID; nobody messages itself; the text is 1 to
``MAX_MESSAGE_CHARS`` characters; a shared file reference is a file name of ``FILE_RE``.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id

#: The longest message (an agent's queue takes 16,000 characters: this leaves room for the heading).
MAX_MESSAGE_CHARS = 12_000
#: A shared file a message carries: the name the hub keeps it under. Matched whole.
FILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/ -]{0,199}")
OWNER = "owner"


def party(actor: str) -> str:
    """A conversation's party for an actor: ``owner``, or the agent's CID as text."""
    if actor == OWNER:
        return OWNER
    kind, _, cid = actor.partition(":")
    if kind == "agent" and cid.isdigit():
        return cid
    raise Refusal("invalid_actor", f"{actor} has no conversations")


def pair(a: str, b: str) -> tuple[str, str]:
    """The two parties in their one order (the owner first, then CIDs by number)."""
    def key(p: str) -> tuple[int, int]:
        return (0, 0) if p == OWNER else (1, int(p))

    lo, hi = sorted((a, b), key=key)
    return lo, hi


def conversation_key(a: str, b: str) -> str:
    """The thread's name: ``3~5``, ``owner~3``."""
    return "~".join(pair(a, b))


def conversation_id(a: str, b: str) -> uuid.UUID:
    return fixed_id("conversation:" + conversation_key(a, b))


def check_message(sender: str, to: str, text: str, file: str | None) -> None:
    if sender == to:
        raise Refusal("message_to_self", "a message goes to another agent, not to yourself")
    if not isinstance(text, str) or not text.strip():
        raise Refusal("empty_message", "the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise Refusal("message_too_long", f"a message is at most {MAX_MESSAGE_CHARS:,} characters")
    if file is not None and (not isinstance(file, str) or not FILE_RE.fullmatch(file) or ".." in file.split("/")):
        raise Refusal("invalid_file", "a shared file is named as the hub keeps it: letters, digits, '.', '-', '_', "
                                      "'/', spaces, at most 200")


class Conversation(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        parties: list[str]

    class Sent(PlazaAggregate.Event):
        sender: str
        to: str
        text: str
        file: str | None
        item: str | None  # the work item it became in the recipient's queue

        def apply(self, c: Conversation) -> None:
            c.count += 1

    def __init__(self, parties: list[str]) -> None:
        self.parties = parties
        self.count = 0

    @classmethod
    def open(cls, ctx: Context, a: str, b: str) -> Conversation:
        return cls.start(ctx, id=conversation_id(a, b), parties=list(pair(a, b)))

    def send(self, ctx: Context, sender: str, to: str, text: str, file: str | None, item: str | None) -> int:
        """One message; its number in the thread."""
        check_message(sender, to, text, file)
        if {sender, to} != set(self.parties):
            raise Refusal("invalid_request", f"this conversation is between {' and '.join(self.parties)}")
        self.record(self.Sent, ctx, sender=sender, to=to, text=text, file=file, item=item)
        return self.count
