"""``audit verify`` and ``replay`` straight against the store, without a hub.

The event store is opened read-only; only ``replay --rebuild`` writes, and it
writes read models, never events.
"""

from __future__ import annotations

from ..config import database_url, folders
from ..events.store import EventStore
from ..projections.registry import all_projections
from ..projections.runner import ReadModels, make_engine, read_model_url


class NoStore(Exception):
    pass


def open_store() -> EventStore:
    f = folders()
    url = database_url()
    if not url and not (f.state / "plaza.sqlite").exists():
        raise NoStore(f"no plaza store in {f.state} (start apid once, or set APZ_DATABASE_URL)")
    return EventStore.open(state_dir=f.state, database_url=url, read_only=True)


def verify() -> dict:
    store = open_store()
    try:
        return store.verify().as_dict()
    finally:
        store.close()


def _read_models(store: EventStore) -> ReadModels:
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


def through_hub_or_store(env, online, off, render) -> int:
    """Ask the hub; if none answers (or --offline), read the store directly."""
    import sys

    from .client import Unreachable
    from .output import refuse

    if not env.args.offline:
        try:
            return env.show(online(env.client), render)
        except Unreachable as e:
            print(f"agentplaza: {e.message}; reading the store directly", file=sys.stderr)
    try:
        return env.show(off(), render)
    except NoStore as e:
        return refuse(str(e), "no_store")
    except KeyError as e:
        return refuse(f"no read model named {e.args[0]!r}", "unknown_read_model")
