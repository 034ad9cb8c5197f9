"""The hub's parts in one place: the store, the read models, the commands, the bus."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from ..adapters.providers.presets import STARTING_PROVIDERS, config_from_preset
from ..commands import models as model_commands
from ..commands import nodes as node_commands
from ..commands import plaza as plaza_commands
from ..commands.unit import Clock, Commands, utc_now
from ..config import HUB_RECORD_FILE, OWNER_TOKEN_FILE, READ_MODELS_FILE, STORE_FILE, Folders
from ..config import database_url as env_database_url
from ..events.anchor import ANCHOR_FILE, ANCHOR_KEY_FILE, Anchors
from ..events.bus import Bus
from ..events.store import EventStore
from ..permissions import check_private
from ..projections.log import unreadable_events
from ..projections.registry import all_projections
from ..projections.runner import ReadModels, make_engine, read_model_url
from ..vault import VaultService
from ..vault.audit import AUDIT_FILE, AUDIT_KEY_FILE
from ..vault.service import KEY_FILE, VAULT_DOCUMENT
from .auth import Sessions, ensure_owner_token, record_owner_token
from .edge import HubNames
from .ratelimit import REDEEM_ATTEMPTS_PER_MIN, SIGN_IN_ATTEMPTS_PER_MIN, PerAddress
from .tls import CERT_FILE
from .tls import KEY_FILE as TLS_KEY_FILE

VERSION = "0.1.0"
#: apid folds at most this many events before it listens; read models further behind the log (a
#: first start over a long log, a read model whose version changed) catch up while it listens.  Folding
#: is some 30,000 to 70,000 events a second at a first start (PostgreSQL to SQLite), on top of about a
#: second of imports: with 50,000 here a first start over 45,000 events listened after 1.97 s on SQLite
#: and 2.38 s on PostgreSQL (the goal is 2 s whatever the log's length); 5,000 is a tenth of a second.
START_CATCH_UP_MAX = 5_000


@dataclass
class Hub:
    folders: Folders
    store: EventStore
    read_models: ReadModels
    commands: Commands
    owner_token_sha256: str
    new_owner_token: str | None
    database_url: str | None
    vault: VaultService | None = None
    bus: Bus = field(default_factory=Bus)
    started: float = field(default_factory=time.time)
    address: str = ""
    #: The signed checkpoints of the chain's head (``events.anchor``).
    anchors: Anchors | None = None
    #: The agents' runtime (node n0 and the guests' channels); None when the hub runs without a node.
    runtime: Any = None
    #: The E2B API's keys and sandboxes (``runtime.e2b``), made on first use.
    e2b: Any = None
    #: The Host names and origins the hub answers (apid sets them from --bind, --public-url, --allow-host).
    names: HubNames = field(default_factory=HubNames)
    #: Loopback callers are the owner unless apid --loopback-trust off.
    loopback_trust: bool = True
    sessions: Sessions = field(default_factory=Sessions)
    #: Served over HTTPS (apid off loopback, or --https); the certificate's SHA-256, the value --pin checks.
    serves_https: bool = False
    fingerprint: str | None = None
    #: The address other machines reach this hub at: the first --public-url, else the address it serves.
    public_url: str = ""
    #: Attempts a minute per caller's address: sign-ins, and join code redemptions (``ratelimit``).
    sign_ins: PerAddress = field(default_factory=lambda: PerAddress(SIGN_IN_ATTEMPTS_PER_MIN))
    redemptions: PerAddress = field(default_factory=lambda: PerAddress(REDEEM_ATTEMPTS_PER_MIN))
    #: False when apid listened before its read models had caught up (a long way behind the log).
    caught_up_at_start: bool = True

    @classmethod
    def open(cls, folders: Folders, *, database_url: str | None = None, clock: Clock = utc_now,
             catch_up_max: int | None = None) -> Hub:
        """The hub on these folders, its read models caught up with the log; with ``catch_up_max``
        (apid), read models further behind than that many events are left for the follower to catch
        up while the hub listens (``caught_up_at_start`` says which it was)."""
        folders.make()
        check_private(*relied_on(folders))  # a folder or file others can read or write stops the hub here
        url = database_url if database_url is not None else env_database_url()
        token_hash, new_token = ensure_owner_token(folders.state)
        store = EventStore.open(state_dir=folders.state, database_url=url)
        commands = Commands(store, clock)
        token_hash = node_commands.rotated_owner_token_sha256(commands) or token_hash  # the log's rotation wins
        plaza_commands.ensure_founded(commands)
        model_commands.ensure_models(commands, [config_from_preset(p) for p in STARTING_PROVIDERS])
        engine = make_engine(read_model_url(state_dir=folders.state, database_url=url))
        read_models = ReadModels(engine, store, all_projections())
        deferred = read_models.setup(defer_over=catch_up_max)
        if not deferred and catch_up_max is not None and read_models.behind() > catch_up_max:
            deferred = True
        try:
            anchors = Anchors(store, folders.state, folders.config).open()
            vault = VaultService.open(folders, commands)
        except BaseException:
            store.close()
            engine.dispose()
            raise
        if not deferred:  # else the follower folds and signs as it catches up
            read_models.catch_up()
            anchors.checkpoint()
        return cls(folders, store, read_models, commands, token_hash, new_token, url, vault, anchors=anchors,
                   caught_up_at_start=not deferred)

    def __post_init__(self) -> None:
        self.read_models.on_folded = self.folded

    def folded(self, records: list) -> None:
        """Every page of events the read models fold, whoever folded it (on that caller's thread)."""
        self.store.forget_moved(records)  # another hub's events: the copies cached here are stale
        self.bus.folded(records)

    def info(self) -> dict:
        return {
            "version": VERSION,
            "address": self.address,
            "https": self.serves_https,
            "fingerprint": self.fingerprint,
            "public_url": self.public_url or self.address,
            "store": {"backend": self.store.backend, "where": self.store.info.where},
            "position": self.store.max_position(),
            "projections_at": self.read_models.position(),
            "started_at": dt.datetime.fromtimestamp(self.started, dt.UTC).isoformat(),
            "uptime_s": round(time.time() - self.started, 1),
        }

    def unreadable(self) -> list[dict]:
        """The stored events that cannot be read back (the read models step over them), oldest first."""
        return self.read_models.rows(unreadable_events, order_by=unreadable_events.c.position)

    def start_notes(self) -> list[str]:
        """What apid says at start about its log: each unreadable event the owner has not voided."""
        return [f"apid: the event at position {u['position']} cannot be read ({u['reason']}); every read model "
                "steps over it. See docs/operations.md, \"A damaged event in the log\"."
                for u in self.unreadable() if u["voided_at"] is None]

    def caught_up_notes(self) -> list[str]:
        """What apid says once read models that were far behind the log at its start have caught up: that, and the
        start's notes, which it could not give at its start (an unreadable event is known once it was read)."""
        return ["apid: the read models have caught up with the log", *self.start_notes()]

    def rotate_owner_token(self, ctx, from_this_machine: bool, session: str | None = None) -> str:
        """A new owner token: the log keeps its hash, the owner-token file gets it, the old one and every
        sign-in made with it stop working at once, except ``session``, the sign-in of the console that
        rotated it (it goes on, with nothing in flight refused); the token, to show once."""
        token = node_commands.rotate_owner_token(self.commands, ctx, from_this_machine).value
        self.owner_token_sha256 = record_owner_token(self.folders.state, token)
        self.sessions.close_all(keep=session)
        return token

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
        if self.vault is not None:
            self.vault.close()
        if self.anchors is not None:
            self.anchors.checkpoint()  # a clean stop leaves the head signed
        self.store.close()
        self.read_models.engine.dispose()


def relied_on(folders: Folders) -> tuple[list, list]:
    """The folders, and the files in them, that the hub relies on (``permissions``)."""
    st, cf = folders.state, folders.config
    sqlite = [(st / f"{name}{tail}", "store file") for name in (STORE_FILE, READ_MODELS_FILE) for tail in ("", "-wal", "-shm")]
    return (
        [(st, "state folder"), (cf, "config folder"), (folders.data, "data folder")],
        [(st / OWNER_TOKEN_FILE, "owner token"), (st / HUB_RECORD_FILE, "hub document"), *sqlite,
         (st / VAULT_DOCUMENT, "vault document"), (st / AUDIT_FILE, "vault audit log"),
         (st / ANCHOR_FILE, "chain checkpoint file"), (cf / KEY_FILE, "vault key file"),
         (cf / AUDIT_KEY_FILE, "vault audit key"), (cf / ANCHOR_KEY_FILE, "chain anchor key"),
         (st / CERT_FILE, "hub certificate"), (st / TLS_KEY_FILE, "hub certificate's key")],
    )
