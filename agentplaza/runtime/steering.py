"""The editor's slash commands on the work in progress: ``/steer``, ``/compress`` and ``/extend-turns``.

The guide ("Editors over ACP"): "They run on the agent at once instead of queuing as chat: /compress
summarises the conversation, /steer <note> steers the work in progress, /extend-turns <n> allows more
model calls". An editor's command is a transcript note (``api/acp_methods``) naming the work item it
was given for; it is the log's word, so a command given through any hub reaches the agent. The
agent's next model turn (``HarnessSession.op_model``) applies every command given for its item since
the turn before, in order, and tells the harness in the answer (``contract.CONVERSATION``,
``contract.MORE_TURNS``): the harness carries on with the conversation the hub hands back.

- ``/steer <note>`` adds the owner's note to the conversation as a user message.
- ``/compress`` asks the agent's own model for a summary of the conversation so far (a metered turn
  like any other) and replaces the conversation by the item's first message with that summary.
- ``/extend-turns <n>`` allows n more model turns (up to ``contract.MAX_TURNS_ALLOWED`` in all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vmm.guest import contract

from ..domain.base import Refusal
from ..projections import agents as agents_rm

#: The commands that change the work in progress (``/stop`` cancels it instead: no model turn needed).
STEERING = ("steer", "compress", "extend-turns")
#: What the agent's model is asked when the editor says ``/compress``.
COMPRESS_PROMPT = ("Summarise the work on this item so far for yourself, so you can carry on from the summary "
                   "alone: what you were asked, what you did and found, what is left. Answer with the summary only.")
STEER_PREFIX = "The owner steers the work in progress: "
SUMMARY_PREFIX = "\n\nWhat you have done on this so far, as you summarised it:\n"


@dataclass
class Changes:
    """What the commands did to one model turn: the conversation to send (and hand back), the turns allowed
    on top, and one line per command for the agent's transcript."""

    conversation: list | None = None
    more_turns: int = 0
    said: list[str] = field(default_factory=list)

    def answer(self) -> dict:
        out: dict[str, Any] = {}
        if self.conversation is not None:
            out[contract.CONVERSATION] = self.conversation
        if self.more_turns:
            out[contract.MORE_TURNS] = self.more_turns
        return out


def given(read_models, cid: int, item: str, after: int) -> tuple[list[dict], int]:
    """The steering commands given for ``item`` in the agent's transcript after entry ``after``, oldest first,
    and the last entry read (where the next look starts)."""
    found: list[dict] = []
    while True:
        try:
            page = agents_rm.transcript(read_models, cid, after=after)
        except Refusal:  # the read models do not show the agent yet: nothing was given through them
            return found, after
        for e in page:
            after = e["seq"]
            d = e["detail"] or {}
            if e["kind"] == "note" and d.get("command") in STEERING and d.get("item") == item:
                found.append(d)
        if len(page) < agents_rm.PAGE_TRANSCRIPT:
            return found, after


def last_entry(read_models, cid: int) -> int:
    """Where looking for an item's commands may start: the transcript's last entry the read models show
    (0 where they do not show the agent yet: every command names its item, so an earlier start is only
    more to read)."""
    try:
        tail = agents_rm.transcript(read_models, cid, limit=1, tail=True)
    except Refusal:
        return 0
    return tail[-1]["seq"] if tail else 0


def apply(commands: list[dict], messages: list, summarise: Callable[[list], str | None]) -> Changes:
    """The commands applied to the conversation the harness sent. ``summarise(conversation)`` is one
    model turn that answers the summary's text, or None where the model call failed."""
    ch = Changes()
    conv = list(messages)
    for d in commands:
        name, arg = d.get("command"), d.get("arg")
        if name == "steer" and isinstance(arg, str):
            conv.append({"role": "user", "content": STEER_PREFIX + arg})
            ch.conversation = conv
            ch.said.append(f"/steer applied: {arg}")
        elif name == "extend-turns" and isinstance(arg, int) and not isinstance(arg, bool) and arg > 0:
            ch.more_turns += arg
            ch.said.append(f"/extend-turns applied: {arg} more model turns allowed")
        elif name == "compress":
            if len(conv) <= 1:
                ch.said.append("/compress: nothing to summarise yet")
                continue
            summary = summarise(conv + [{"role": "user", "content": COMPRESS_PROMPT}])
            if summary is None:
                ch.said.append("/compress: the summary's model call failed; the conversation is kept whole")
                continue
            first = conv[0] if conv and conv[0].get("role") == "user" else {"role": "user", "content": ""}
            n = len(conv)
            conv = [{"role": "user", "content": str(first.get("content") or "") + SUMMARY_PREFIX + summary}]
            ch.conversation = conv
            ch.said.append(f"/compress applied: {n} messages summarised into one")
    return ch
