"""``audit verify``, ``audit anchor``, ``vault audit --verify`` and ``replay``
straight against the store and files, without a hub.

The event store is opened read-only and no checkpoint or key is written; only
``replay --rebuild`` writes, and it writes read models, never events.

Every command module imports this one, so it loads nothing heavy itself: the store, the
projections and the vault's files are imported by the function that uses them, and a command that
talks to a hub never loads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import database_url, folders

if TYPE_CHECKING:
    from ..events.chain import Anchor
    from ..events.store import EventStore
    from ..projections.runner import ReadModels

#: What the command line takes from here besides the store: an anchor's syntax (``audit verify
#: --anchor``) and shredding a local file (``vault import --shred``), each loaded when first used.
__all__ = ["AnchorSyntax", "parse_anchor", "shred", "NoStore", "open_store", "verify", "through_hub_or_store"]


class AnchorSyntax(ValueError):
    """An anchor (``HASH@POSITION``) that does not parse."""


def parse_anchor(text: str) -> Anchor:
    from ..events import anchor

    try:
        return anchor.parse_anchor(text)
    except anchor.AnchorSyntax as e:
        raise AnchorSyntax(str(e)) from None


def shred(path: Any) -> None:
    from ..vault.files import shred as zero_and_delete

    zero_and_delete(path)


class NoStore(Exception):
    pass


def open_store() -> EventStore:
    from ..events.store import EventStore

    f = folders()
    url = database_url()
    if not url and not (f.state / "plaza.sqlite").exists():
        raise NoStore(f"no plaza store in {f.state} (start apid once, or set APZ_DATABASE_URL)")
    return EventStore.open(state_dir=f.state, database_url=url, read_only=True)


class Refused(Exception):
    """An offline check that cannot answer: (message, code)."""


def verify(given: Anchor | None = None) -> dict:
    from ..events import anchor as anchors

    f = folders()
    store = open_store()
    try:
        return anchors.check(store, f.state, f.config, given).as_dict()
    finally:
        store.close()


def anchor() -> dict:
    from ..events import anchor as anchors

    f = folders()
    store = open_store()
    try:
        try:
            position, head = anchors.extended_head(store, anchors.latest_checkpoint(f.state, f.config))
        except (anchors.ChainBroken, ValueError) as e:
            raise Refused(f"{e}; run agentplaza audit verify", "chain_broken") from None
        return {"anchor": anchors.format_anchor(position, head), "position": position, "head": head.hex()}
    finally:
        store.close()


def vault_audit_verify() -> dict:
    from ..vault.audit import AUDIT_FILE, AUDIT_KEY_FILE, verify_file

    f = folders()
    try:
        return verify_file(f.state / AUDIT_FILE, f.config / AUDIT_KEY_FILE)
    except ValueError as e:
        raise Refused(str(e), "no_audit_key") from None


def _read_models(store: EventStore) -> ReadModels:
    from ..projections.registry import all_projections
    from ..projections.runner import ReadModels, make_engine, read_model_url

    f = folders()
    engine = make_engine(read_model_url(state_dir=f.state, database_url=database_url()))
    return ReadModels(engine, store, all_projections())


def rebuild(name: str | None) -> dict:
    store = open_store()
    try:
        rm = _read_models(store)
        if name is not None and name not in rm.states:
            raise KeyError(name)
        rm.setup()
        return {"rebuilt": rm.rebuild(name)}
    finally:
        store.close()


def replay(at: str | None, upto: int | None, name: str | None) -> dict:
    store = open_store()
    try:
        rm = _read_models(store)
        if name is not None and name not in rm.states:
            raise KeyError(name)
        if at is not None:
            upto = store.position_at(at)
        if upto is None:
            upto = store.max_position()
        return {"upto": upto, "at": at, "read_models": rm.replay(upto, [name] if name else None)}
    finally:
        store.close()


def through_hub_or_store(env, online, off, render, status=lambda data: 0) -> int:
    """Ask the hub; if none answers (or --offline), read the store directly.
    ``status`` gives the exit status of an answer (a broken log is not 0)."""
    import sys

    from .client import Unreachable
    from .output import refuse

    data = None
    if not env.args.offline:
        try:
            data = online(env.client)
        except Unreachable as e:
            print(f"agentplaza: {e.message}; reading the store directly", file=sys.stderr)
    if data is None:
        try:
            data = off()
        except NoStore as e:
            return refuse(str(e), "no_store")
        except Refused as e:
            return refuse(*e.args)
        except KeyError as e:
            return refuse(f"no read model named {e.args[0]!r}", "unknown_read_model")
    return env.show(data, render) or status(data)
