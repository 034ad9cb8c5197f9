"""The daily fetch of the public price lists: each list kept in the store when it changed, the
last good copy left in use when a fetch fails.  Set APZ_PRICE_FETCH=off to keep the hub from
fetching them; ``POST /v1/models/prices/refresh`` fetches them at once."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import httpx

from ..adapters.providers import prices as price_lists
from ..commands import models as model_commands
from ..projections import models as rm
from ..vault.scrub import scrubber_of

#: Set APZ_PRICE_FETCH=off to keep the hub from fetching the public price lists.
PRICE_FETCH_ENV = "APZ_PRICE_FETCH"
#: The first daily fetch waits this long after the hub starts.
FIRST_FETCH_DELAY_S = 60.0
#: The longest error text kept for a list that could not be fetched.
MAX_ERROR_CHARS = 300
#: After a list is kept, the read models are brought up to it in rounds of at most this many events
#: (a hub still catching up a long log at the first fetch holds a round at a time, never the log).
CATCH_UP_MOST = 20_000


def fetch_prices(hub: Any, client: httpx.Client | None = None) -> dict:
    """Fetch each public list once; keep it when it changed; a failure leaves the last good copy in use."""
    kept = rm.price_lists(hub.read_models)
    day = hub.commands.clock().date().isoformat()
    out: dict[str, Any] = {}
    stored_at = 0  # the position of the last list kept, if one was
    own = client is None
    client = client or httpx.Client(follow_redirects=True)
    try:
        for source in price_lists.SOURCES:
            try:
                got = price_lists.fetch(source, client)
            except (httpx.HTTPError, ValueError) as e:
                last = kept.get(source)
                out[source] = {"ok": False, "error": scrubber_of(hub).error_text(e)[:MAX_ERROR_CHARS],
                               "in_use": last["day"] if last else "snapshot"}
                continue
            digest = price_lists.digest(got)
            ctx = hub.commands.context("hub", f"daily fetch of the {source} price list")
            done = model_commands.store_price_list(hub.commands, ctx, source, day, got, digest,
                                                   kept[source]["digest"] if source in kept else None)
            out[source] = {"ok": True, "count": len(got), "day": day, "stored": done.value}
            stored_at = max([stored_at, *done.positions])
    finally:
        if own:
            client.close()
    # The lists kept are read from the read models next: fold up to them, a round at a time (the lock is
    # let go between rounds, so the hub's follower goes on too); a fetch that kept nothing folds nothing.
    while (at := hub.read_models.position()) < stored_at:
        hub.read_models.catch_up(CATCH_UP_MOST)
        if hub.read_models.position() == at:
            break  # a read model that cannot fold stays where it is (``failing`` says why); so does this
    return out


def fetch_off() -> bool:
    return os.environ.get(PRICE_FETCH_ENV, "").lower() in ("off", "0", "no", "false")


async def daily(hub: Any) -> None:
    """The daily fetch of the public price lists, when the network allows; a failed fetch never stops the hub."""
    if fetch_off():
        return
    await anyio.sleep(FIRST_FETCH_DELAY_S)
    while True:
        try:
            result = await anyio.to_thread.run_sync(fetch_prices, hub)
            failed = [s for s, r in result.items() if not r["ok"]]
            if failed:
                print(f"apid: price lists not fetched ({', '.join(failed)}); the last good copy stays in use",
                      file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - a failed fetch never stops the hub
            print(f"apid: price fetch failed: {scrubber_of(hub).error_text(e)}", file=sys.stderr)
        await anyio.sleep(price_lists.FETCH_EVERY_S)
