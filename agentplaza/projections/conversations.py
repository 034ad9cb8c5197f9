"""Conversations' read model: the threads (agent with agent, and the owner with an agent) and their
messages, for the Conversations screen and ``agentplaza conversations``.

- ``rm_conversations``: one row per thread (``3~5``, ``owner~3``): its parties, how many messages,
  the last one's time and text.
- ``rm_conversation_messages``: every message, in order (append-only): agents' ``Conversation.Sent``,
  and what the owner told an agent (``Agent.Told`` by the owner; a hub delivery, which has a ``ref``,
  is no message).
- ``rm_conversation_agents``: which agent id is which CID (a ``Told`` names only its agent's id).
"""

from __future__ import annotations

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.conversations import OWNER, conversation_key, pair
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, evictable, metadata

#: The last message's text is kept cut to this many characters in the list.
PREVIEW_CHARS = 200

conversations = evictable(sa.Table(
    "rm_conversations", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("a", sa.String(32), nullable=False),
    sa.Column("b", sa.String(32), nullable=False),
    sa.Column("messages", sa.Integer, nullable=False),
    sa.Column("last_at", sa.String(40), nullable=False),
    sa.Column("last_position", sa.BigInteger, nullable=False, index=True),
    sa.Column("last_text", sa.Text, nullable=False),
))

messages = append_only(sa.Table(
    "rm_conversation_messages", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("conversation", sa.String(64), nullable=False, index=True),
    sa.Column("sender", sa.String(32), nullable=False),
    sa.Column("to", sa.String(32), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("file", sa.String(200)),
    sa.Column("item", sa.String(40)),
    sa.Column("at", sa.String(40), nullable=False),
))

agent_cids = sa.Table(
    "rm_conversation_agents", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.BigInteger, nullable=False),
)

LIST_COLUMNS = ["id", "a", "b", "messages", "last_at", "last_text"]


class ConversationsProjection(Projection):
    name = "conversations"
    version = 1
    tables = (conversations, messages, agent_cids)

    def _message(self, e: EventRecord, rows: Rows, sender: str, to: str, text: str, file: str | None,
                 item: str | None) -> None:
        key = conversation_key(sender, to)
        a, b = pair(sender, to)
        row = rows.get("rm_conversations", key)
        rows.put("rm_conversations", {
            "id": key, "a": a, "b": b, "messages": (row["messages"] if row else 0) + 1, "last_at": e.at,
            "last_position": e.position, "last_text": text[:PREVIEW_CHARS]})
        rows.put("rm_conversation_messages", {
            "position": e.position, "conversation": key, "sender": sender, "to": to, "text": text, "file": file,
            "item": item, "at": e.at})

    def on_Conversation_Sent(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._message(e, rows, d["sender"], d["to"], d["text"], d.get("file"), d.get("item"))

    def on_Agent_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_conversation_agents", {"id": e.originator_id, "cid": e.data["cid"]})

    def on_Agent_Told(self, e: EventRecord, rows: Rows) -> None:
        if e.actor != OWNER or e.data.get("ref") is not None:
            return
        agent = rows.get("rm_conversation_agents", e.originator_id)
        if agent is not None:
            self._message(e, rows, OWNER, str(agent["cid"]), e.data["text"], None, e.data.get("item"))


# -- queries --------------------------------------------------------------------------------------------

def conversation_rows(read_models, party: str | None, limit: int) -> list[dict]:
    """The threads, the latest first; with ``party`` (``owner`` or a CID), only that party's."""
    c = conversations.c
    where = [sa.or_(c.a == party, c.b == party)] if party is not None else []
    return read_models.rows(conversations, *where, order_by=sa.desc(c.last_position), limit=limit)


def conversation_row(read_models, key: str, limit: int) -> dict:
    found = read_models.rows(conversations, conversations.c.id == key)
    if not found:
        raise Refusal("no_conversation", f"no conversation {key!r}; they are named like 3~5 or owner~3")
    m = messages.c
    latest = read_models.rows(messages, m.conversation == key, order_by=sa.desc(m.position), limit=limit)
    return {**found[0], "thread": list(reversed(latest))}


def counts(read_models) -> dict:
    return {"conversations": len(read_models.rows(conversations))}
