"""One home per refusal: every code the plaza raises is in ``domain/refusals.py`` with its kind,
and the API maps each kind to one HTTP status."""

from __future__ import annotations

import ast
import pathlib

import pytest
from support.source import parsed

from agentplaza.api.errors import STATUS_OF
from agentplaza.domain.base import Refusal
from agentplaza.domain.refusals import CATALOGUE, Kind

ROOT = pathlib.Path(__file__).resolve().parent.parent
RAISERS = {"Refusal", "ApiError"}


def raised_codes() -> dict[str, str]:
    """Each literal code given to a refusal in the source, with where it is raised."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "agentplaza").rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = getattr(f, "id", None) or getattr(f, "attr", None)
            supers = name == "__init__" and isinstance(f.value, ast.Call) and getattr(f.value.func, "id", "") == "super"
            code = node.args[0]
            if (name in RAISERS or supers) and isinstance(code, ast.Constant) and isinstance(code.value, str):
                out.setdefault(code.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def test_every_code_raised_is_in_the_catalogue():
    missing = {c: at for c, at in raised_codes().items() if c not in CATALOGUE}
    assert not missing, f"add these to agentplaza/domain/refusals.py: {missing}"


def test_every_code_in_the_catalogue_is_raised_somewhere():
    source = "\n".join(p.read_text() for d in ("agentplaza", "jhrl") for p in (ROOT / d).rglob("*.py"))
    unused = sorted(c for c in CATALOGUE if f'"{c}"' not in source and f"'{c}'" not in source
                    and not c.startswith("approval_"))
    assert not unused, f"no part of the plaza raises these any more: {unused}"


def test_each_kind_has_one_http_status():
    assert set(STATUS_OF) == set(Kind)
    assert STATUS_OF[Kind.INVALID] == 422 and STATUS_OF[Kind.NOT_FOUND] == 404 and STATUS_OF[Kind.LOCKED] == 423


def test_a_code_outside_the_catalogue_is_a_bug_not_a_refusal():
    with pytest.raises(LookupError, match="not in domain/refusals.py"):
        Refusal("no_such_code_anywhere", "x")


def test_a_refusal_has_its_kind_from_the_catalogue():
    assert Refusal("vault_sealed", "sealed").kind is Kind.LOCKED
    assert Refusal("model_not_allowed", "no").kind is Kind.FORBIDDEN
