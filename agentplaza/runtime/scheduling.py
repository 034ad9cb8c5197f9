"""The scheduler in the hub: a pass every ``commands.scheduler.INTERVAL_S`` (none at all while the
plaza is held), on the read models as the hub's follower keeps them.

A pass plans on the read models and each assignment re-checks on fresh state
(``commands.scheduler``); before a pass the loop waits, a bounded moment, for the read models to
show every event the store holds, so a task created a moment ago is seen at once.
"""

from __future__ import annotations

import logging
import time

import anyio

from ..commands import scheduler
from ..projections import work

log = logging.getLogger(__name__)

#: The longest a pass waits for the read models to reach the store's last event.
SETTLE_S = 2.0
#: How often it looks while it waits.
SETTLE_POLL_S = 0.05


def run_pass(hub) -> scheduler.Pass:
    """One pass on the read models as they are now."""
    return scheduler.run_pass(hub.commands, work.queue(hub.read_models))


async def settled(hub) -> None:
    """Wait (at most ``SETTLE_S``) until the read models show every event stored now."""
    target = await anyio.to_thread.run_sync(hub.store.max_position)
    end = time.monotonic() + SETTLE_S
    while hub.read_models.position() < target and time.monotonic() < end:
        await anyio.sleep(SETTLE_POLL_S)


async def background(hub) -> None:
    """The hub's scheduler loop; a pass that failed is retried at the next interval, the hub carries on."""
    while True:
        await anyio.sleep(scheduler.INTERVAL_S)
        try:
            await settled(hub)
            await anyio.to_thread.run_sync(run_pass, hub)
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.debug("a scheduler pass failed", exc_info=True)
