"""Conversations' commands: an agent's message to another agent.

The message is ``Conversation.Sent`` in the pair's thread and, in the same commit, told to the
recipient's queue (``Agent.Told``, with its transcript entry), waking it first if it sleeps. A
message the recipient cannot take (it is stopped, retired or deleted) is refused and nothing is kept.
"""

from __future__ import annotations

from ..domain.base import Context
from ..domain.conversations import Conversation, check_message, conversation_id, conversation_key, party
from .agents import agent_in, transcript_in
from .society import interacted_in
from .unit import Commands, Done, Unit


def message_text(sender: str, key: str, text: str, file: str | None) -> str:
    who = "the owner" if sender == "owner" else f"agent {sender}"
    carried = f"\nShared file: {file} (read it with plaza_file_read)" if file else ""
    return (f"Message from {who} (conversation {key}):\n{text}{carried}\n"
            f"Answer with plaza_message to {sender}." if sender != "owner" else f"Message from {who}:\n{text}{carried}")


def send(cmds: Commands, ctx: Context, to: int, text: str, file: str | None = None) -> Done[dict]:
    sender, recipient = party(ctx.actor), str(to)
    check_message(sender, recipient, text, file)
    item = "w-" + cmds.new_id()[:12]
    key = conversation_key(sender, recipient)

    def decide(unit: Unit) -> dict:
        a = agent_in(unit, to)
        body = message_text(sender, key, text, file)
        a.tell(ctx, item, body)
        tr = transcript_in(unit, a)
        tr.add(ctx, "told", text=body, detail={"item": item, "from": ctx.actor, "conversation": key})
        c = unit.get(conversation_id(sender, recipient)) or Conversation.open(ctx, sender, recipient)
        n = c.send(ctx, sender, recipient, text, file, item)
        unit.add(a, tr, c)
        if sender.isdigit():  # two agents talked: an interaction of their bond
            interacted_in(unit, ctx, int(sender), to, f"{key}:{n}")
        return {"sent": True, "item": item, "conversation": key, "message": n}

    return cmds.run(decide)
