"""One simulated plaza: the real store, read models, commands and vault, with everything that could
differ between two runs injected from the seed.

- the clock (``SimClock``): starts at ``T0`` and moves only when the workload or a fault moves it;
- the ids (``World.new_id``): every correlation id, agent id, work item and tool-call id the
  commands make comes from ``Commands.new_id``, drawn here from the seed;
- the random bytes of the vault's cryptography (the vault's ``random_source``): keys, salts and nonces;
- the store: a fresh SQLite state folder, or a fresh PostgreSQL database on the server
  ``APZ_DATABASE_URL`` names (dropped at the end).

A crash throws away everything the process holds (the store handle and its cache, the read
models' engine, the vault service and its unsealed key) and opens it all again from the store and
the state folder, as a hub does at its next start.  A second writer is another store handle and
``Commands`` on the same database, as a second hub is.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from ..adapters.providers.presets import STARTING_PROVIDERS, config_from_preset
from ..commands import models as model_commands
from ..commands import plaza as plaza_commands
from ..commands.unit import Commands
from ..config import Folders
from ..events.store import EventStore
from ..projections.registry import all_projections
from ..projections.runner import ReadModels, make_engine, read_model_url
from ..runtime import forge
from ..vault import VaultService
from . import guests

#: Where every simulated plaza's clock starts (a Monday morning, UTC).
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
#: The vault's scrypt work factor in the simulator (the real one takes 0.1 s a guess; the simulator
#: unseals often, and what it checks does not depend on the cost).
SIM_SCRYPT_N = 2**8
#: The passphrase the simulated owner gives the vault.
SIM_PASSPHRASE = "simulated owner passphrase"
STORES = ("sqlite", "postgres")


class SimClock:
    """The simulated time: what every command's context and every read-model query reads."""

    def __init__(self, at: dt.datetime = T0):
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += dt.timedelta(seconds=seconds)


class NoPostgres(Exception):
    """``--store postgres`` without a server to make the run's database on."""


def _fresh_database(admin_url: str) -> tuple[str, Callable[[], None]]:
    """A new, empty database on the server of ``admin_url``; its URL and how to drop it."""
    import uuid

    import psycopg

    name = f"apz_sim_{uuid.uuid4().hex[:12]}"  # the database's name is outside the simulated plaza
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    parts = urlparse(admin_url)
    url = urlunparse(parts._replace(path=f"/{name}"))

    def drop() -> None:
        with psycopg.connect(admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return url, drop


class World:
    """The simulated plaza's process state, and how to throw it away."""

    def __init__(self, seed: int, store: str = "sqlite", admin_url: str | None = None):
        if store not in STORES:
            raise ValueError(f"a store is one of {', '.join(STORES)}")
        self.seed = seed
        #: The vault's random bytes (keys, salts, nonces, recovery codes), given to it as its source.
        self._vault_rng = random.Random(f"{seed}:vault")
        self.clock = SimClock()
        self._ids = random.Random(f"{seed}:ids")
        self.dir = Path(tempfile.mkdtemp(prefix="apz-sim."))
        self.folders = Folders(self.dir / "state", self.dir / "config", self.dir / "data").make()
        self.database_url: str | None = None
        self._drop_database: Callable[[], None] | None = None
        if store == "postgres":
            if not admin_url:
                raise NoPostgres("--store postgres wants APZ_DATABASE_URL: a server the simulator may make a "
                                 "database on")
            self.database_url, self._drop_database = _fresh_database(admin_url)
        self.crashes = 0
        #: The process died inside a step (``faults.crash_mid_step``): it runs nothing more until ``crash``.
        self.dying = False
        self.other: Commands | None = None
        #: The guests connected now (``sim.guests``): their sessions live in the hub's process.
        self.guests: dict[int, Any] = {}
        self._open()
        plaza_commands.ensure_founded(self.cmds)
        model_commands.ensure_models(self.cmds, [config_from_preset(p) for p in STARTING_PROVIDERS])  # as a hub's start
        self.vault = self._open_vault()
        self.vault.add_passphrase(self.cmds.context("owner"), SIM_PASSPHRASE)
        self.runtime = guests.runtime_of(self)

    # -- ids and process state -----------------------------------------------------------------

    def new_id(self) -> str:
        return f"{self._ids.getrandbits(128):032x}"

    def _open(self) -> None:
        self.store = EventStore.open(state_dir=self.folders.state, database_url=self.database_url)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=self.folders.state, database_url=self.database_url)),
                             self.store, all_projections())
        self.rm.setup()
        self.cmds = Commands(self.store, self.clock, self.new_id)

    def _open_vault(self) -> VaultService:
        return VaultService.open(self.folders, self.cmds, passphrase_n=SIM_SCRYPT_N, recovery_n=SIM_SCRYPT_N,
                                 random_source=self._vault_rng.randbytes)

    def _close_process(self) -> None:
        for g in self.guests.values():  # the sessions die with the process; the guests stay
            g.abandon()
        self.vault.close()
        self.store.close()
        self.rm.engine.dispose()
        if self.other is not None:
            self.other.store.close()
            self.other = None

    def crash(self, dying: Callable[[], None] | None = None) -> None:
        """The hub dies between two commits: everything in memory is lost; the next start opens the
        store, loads the read models from their tables and catches them up, and finds the vault sealed.
        ``dying``: what the process left last as it died (a torn write), after everything else it did."""
        self._close_process()
        if dying is not None:
            dying()
        self.dying = False
        self.crashes += 1
        self._open()
        self.rm.catch_up()
        self.vault = self._open_vault()
        self.runtime = guests.runtime_of(self)
        forge.server_of(self.runtime.hub)  # as apid's start: the repositories' refs set to the log's
        self.reconnect()

    def reconnect(self) -> None:
        """Every guest that was connected reconnects to the hub that runs now (hello, then asks for work);
        a harness that works its queue (``Guest.works``) works it again."""
        for cid in sorted(self.guests):
            g = guests.Guest(self.runtime, cid, works=getattr(self.guests[cid], "works", False))
            self.guests[cid] = g
            g.ask({"op": "hello"})
            if g.works:
                guests.take_and_do(g)  # (a working harness does the item it is handed)
            elif not g.ended:
                g.ask({"op": "next", "wait": 0})
            if g.ended:
                del self.guests[cid]

    def second_writer(self) -> Commands:
        """Another hub's ``Commands`` on the same store (opened once, kept until the next crash)."""
        if self.other is None:
            other = EventStore.open(state_dir=self.folders.state, database_url=self.database_url)
            self.other = Commands(other, self.clock, self.new_id)
        return self.other

    def read(self, names: list[str] | None = None) -> dict[str, Any]:
        self.rm.catch_up()
        return self.rm.live(names)

    def close(self) -> None:
        self._close_process()
        if self._drop_database is not None:
            self._drop_database()
        shutil.rmtree(self.dir, ignore_errors=True)
