"""The vault's use records: the groups whose minute has ended are recorded every few seconds, so a
quiet minute is not held back until the next use."""

from __future__ import annotations

from typing import Any

import anyio

#: How often the hub records the use groups whose minute has ended.
USE_FLUSH_INTERVAL_S = 10.0


async def flush_uses(hub: Any) -> None:
    """Record ended use groups every few seconds (nothing to do on a hub with no vault)."""
    while True:
        await anyio.sleep(USE_FLUSH_INTERVAL_S)
        if hub.vault is not None:
            await anyio.to_thread.run_sync(hub.vault.flush_uses)
