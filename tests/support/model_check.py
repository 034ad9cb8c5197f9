"""The one step of every model-based machine: the model decides, then the product must agree."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentplaza.commands.unit import Done
from agentplaza.domain.base import Refusal
from agentplaza.events.store import EventStore

from .model_books import Refused


def check(model_says: Callable[[], object], product: Callable[[], object], store: EventStore):
    """The model decides first.  Allowed: the product must succeed (its value is returned).
    Forbidden: the product must refuse with the model's code and write nothing (None is returned)."""
    before = store.max_position()
    try:
        model_says()
    except Refused as no:
        with pytest.raises(Refusal) as info:
            product()
        assert info.value.code == no.code, f"refused {info.value.code} ({info.value.message}), the model says {no.code}"
        assert store.max_position() == before, "a refusal changed something"
        return None
    try:
        out = product()
    except Refusal as e:
        raise AssertionError(f"the model allows this, the product refused it: {e.code}: {e.message}") from None
    return out.value if isinstance(out, Done) else out
