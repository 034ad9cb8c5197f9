"""The house rules as a test: ``layers.toml`` says which part may import which; an import it does
not allow fails here, naming the module, the line and the reason."""

from __future__ import annotations

import ast
import pathlib
import tomllib
from dataclasses import dataclass

from support.source import parsed

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULES = tomllib.loads((ROOT / "layers.toml").read_text())
PACKAGES = ("agentplaza", "jhrl", "vmm")


@dataclass(frozen=True)
class Arrow:
    module: str
    line: int
    imported: str
    source: str
    target: str


def part_of(module: str) -> str | None:
    """The part holding a module: the one whose ``holds`` entry is its longest prefix."""
    best, length = None, -1
    for name, part in RULES["parts"].items():
        for held in part["holds"]:
            if (module == held or module.startswith(held + ".")) and len(held) > length:
                best, length = name, len(held)
    return best


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: pathlib.Path, module: str) -> list[tuple[int, str]]:
    """Every project module this file imports (absolute names), with its line."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]  # a.name may be a module
    return sorted({(line, name) for line, name in out if name.split(".")[0] in PACKAGES})


def arrows(files: list[pathlib.Path] | None = None, module_of=module_name) -> list[Arrow]:
    files = files if files is not None else [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    out = []
    for path in files:
        module = module_of(path)
        source = part_of(module)
        for line, imported in imports(path, module):
            target = part_of(imported)
            if source is not None and target is not None and source != target:
                out.append(Arrow(module, line, imported, source, target))
    return out


def reason(source: str, target: str) -> str:
    for f in RULES["forbidden"]:
        if f["from"] == source and target in f["to"]:
            return f["reason"]
    return f"{target} is not among what {source} may import (layers.toml)"


def broken(found: list[Arrow]) -> list[str]:
    return [f"{a.module}:{a.line} imports {a.imported} ({a.source} -> {a.target}): {reason(a.source, a.target)}"
            for a in found if a.target not in RULES["parts"][a.source]["may_import"]]


def test_every_module_belongs_to_a_part():
    lost = [module_name(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if part_of(module_name(p)) is None]
    assert not lost


def test_the_forbidden_arrows_are_never_allowed():
    for f in RULES["forbidden"]:
        for target in f["to"]:
            if target in RULES["parts"]:
                assert target not in RULES["parts"][f["from"]]["may_import"], (f["from"], target)


def test_no_module_imports_what_its_part_may_not():
    problems = broken(arrows())
    assert not problems, "\n".join(problems)


def test_a_forbidden_import_fails_the_test(tmp_path):
    """A synthetic domain module that imports the API is caught, with the rule's reason."""
    fake = tmp_path / "bad.py"
    fake.write_text("from agentplaza.api import app\n\n\ndef later():\n    from ..events import store\n")
    found = broken(arrows([fake], module_of=lambda p: "agentplaza.domain.bad"))
    assert len(found) == 2
    assert "agentplaza.domain.bad:1 imports agentplaza.api.app (domain -> api)" in found[0]
    assert "the domain is pure rules" in found[0]
    assert "agentplaza.events.store (domain -> events)" in found[1]


#: The most lines one module may have: past it, a module holds more than one thing.
MAX_MODULE_LINES = 800


def test_no_module_is_over_the_limit():
    over = {str(p.relative_to(ROOT)): n for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not over, f"split these (at most {MAX_MODULE_LINES} lines): {over}"
