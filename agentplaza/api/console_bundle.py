"""The frame's own modules written into one file: what the hub serves as ``js/main.js`` under the digest.

The front page runs ``js/main.js``, whose static imports bring in the frame (frame.js, live.js,
signin.js, screens/index.js) and the two modules every screen shares (api.js, ui.js). Each module is
a file the browser reads from its cache and compiles, and the first draw waits for the last of
them: with seven files, a usable Overview came about 5% later than with three (bench/console.py, two
hubs side by side). So the hub writes, from the installed files and with no build step, one
``main.js`` that holds every module of main.js's static closure. A module written in keeps its
``export``s, so main.js exports them all; a module outside the closure that imports one (the screens
import api.js and ui.js) is served, under the digest, with that import line addressed to main.js
instead (``Bundle.rewritten``): the frame and the screens share one instance of each module, and the
first screen needs two files, main.js and its own. A module of the closure that something imports
with ``import()`` stays a file of its own (with what it imports), and main.js imports it by its
address.

What the writing relies on (tests/test_console.py holds each rule for the installed files):

- every static import is one line, ``import {a, b} from "./x.js";`` (no default, no namespace, no
  renaming of a name taken from a module that is written in);
- a module's top-level names are declared at the start of a line, and no two written-in modules
  declare the same name (nor a name another of them imports);
- nothing imports main.js itself;
- ``import("./x.js")`` takes a string literal: its address is rewritten for main.js's folder.

A file that breaks a rule raises ``BundleError`` naming it; the hub then serves the files as they are
(routes/console.py), slower but whole.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

#: The module the front page runs: the bundle's root, written last.
ROOT_MODULE = "js/main.js"
#: A static import, whole (the one form the console's modules use).
IMPORT_LINE = re.compile(r'^import \{([^}]*)\} from "(\.{1,2}/[^"]+)";[ \t]*$', re.M)
#: Any other start of a static import (a default, a namespace, one spread over lines): refused.
ANY_IMPORT = re.compile(r"^import\b", re.M)
#: A dynamic import of a relative address.
DYNAMIC_IMPORT = re.compile(r'\bimport\("(\.{1,2}/[^"]+)"\)')
#: V8's compile hint (Chrome 136 and later): the first line of every console module, and of main.js as
#: written. The functions of a file that opens with it are compiled as the file is read, on a background
#: thread, rather than each on the main thread the first time it is called: the modules' functions run
#: as the first screen draws (bench/console.py, Chrome traces: the main thread's compiling on a Treasury
#: load went from about 5 ms to 2 ms).
COMPILE_HINT = "//# allFunctionsCalledOnLoad"
#: A top-level declaration: at the start of a line, with or without export.
DECLARATION = re.compile(r"^(?:export\s+)?(?:async\s+)?(function\*?|class|const|let|var)\s+([^=;(]+)", re.M)


class BundleError(ValueError):
    """A console module breaks a rule the writing relies on."""


@dataclass(frozen=True)
class Bundle:
    text: bytes  #: main.js as served
    separate: tuple[str, ...]  #: the modules it imports by address, each before those that import it
    written_in: tuple[str, ...]  #: the modules it holds, in the order written (main.js last)
    #: every other module that imports a written-in one, as served: those imports addressed to main.js
    rewritten: dict[str, bytes] = field(default_factory=dict)


def _resolve(module: str, target: str) -> str:
    return posixpath.normpath(posixpath.join(posixpath.dirname(module), target))


def _relative(target: str) -> str:
    """The address of a console module as main.js (in js/) names it."""
    rel = posixpath.relpath(target, posixpath.dirname(ROOT_MODULE))
    return rel if rel.startswith("../") else "./" + rel


def _names(spec: str) -> list[tuple[str, str]]:
    """``a, b as c`` -> [(a, a), (b, c)]: each imported name and the name it has here."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if part:
            name, _, local = part.partition(" as ")
            out.append((name.strip(), (local or name).strip()))
    return out


def _declared(text: str) -> set[str]:
    names: set[str] = set()
    for kind, head in DECLARATION.findall(text):
        if kind.startswith(("function", "class")):
            names.add(re.match(r"\s*\*?\s*([\w$]+)", head).group(1))
            continue
        head = head.strip().strip("{}[]")
        for part in head.split(","):
            part = part.split(":")[-1].strip()  # const {a: b} declares b
            if part.isidentifier():
                names.add(part)
    return names


def write(read, modules: set[str]) -> Bundle:
    """The bundle of ROOT_MODULE; ``read(module)`` gives a module's text, ``modules`` names every
    console module (``js/...``)."""
    texts = {m: read(m) for m in modules}
    static: dict[str, list[tuple[str, str]]] = {}  # module -> [(target, names)]
    for m, text in texts.items():
        lines = IMPORT_LINE.findall(text)
        if len(ANY_IMPORT.findall(text)) != len(lines):
            raise BundleError(f"{m}: an import not of the form import {{a, b}} from \"./x.js\";")
        static[m] = [(_resolve(m, target), names) for names, target in lines]
        for target, _ in static[m]:
            if target not in modules:
                raise BundleError(f"{m} imports {target}, which is not a console module")

    order: list[str] = []  # the root's static closure, each module after its imports

    def visit(m: str, path: tuple[str, ...] = ()) -> None:
        if m in path:
            raise BundleError(f"an import cycle: {' -> '.join((*path, m))}")
        if m in order:
            return
        for target, _ in static[m]:
            visit(target, (*path, m))
        order.append(m)

    visit(ROOT_MODULE)
    closure = set(order)
    if any(t == ROOT_MODULE for m in modules for t, _ in static[m]):
        raise BundleError(f"{ROOT_MODULE} is imported by another module")
    # A module of the closure stays separate if something imports it with import() (the module it is
    # must be its own); a static import from outside the closure is addressed to main.js instead.
    dynamic = {_resolve(m, t) for m, text in texts.items() for t in DYNAMIC_IMPORT.findall(text)}
    separate = {m for m in closure if m in dynamic}
    while True:  # what a separate module imports is separate too
        more = {t for m in separate for t, _ in static[m]} - separate
        if not more:
            break
        separate |= more
    if ROOT_MODULE in separate:
        raise BundleError(f"{ROOT_MODULE} is imported by another module")
    written = [m for m in order if m not in separate]

    imports: dict[str, dict[str, str]] = {}  # separate module -> {local name: its name there}
    seen: dict[str, str] = {}  # top-level name -> the written-in module that declares it
    bodies = []
    for m in written:
        for name in _declared(texts[m]):
            if name in seen:
                raise BundleError(f"{m} and {seen[name]} both declare {name}")
            seen[name] = m
    for m in written:
        for target, names in static[m]:
            for name, local in _names(names):
                if target in separate:
                    had = imports.setdefault(target, {}).setdefault(local, name)
                    if had != name:
                        raise BundleError(f"{m}: the name {local} means two things in the bundle")
                elif local != name:
                    raise BundleError(f"{m} renames {name} from {target}, which is written in")
        body = IMPORT_LINE.sub("", texts[m])
        body = DYNAMIC_IMPORT.sub(lambda x, m=m: f'import("{_relative(_resolve(m, x.group(1)))}")', body)
        bodies.append(f"// ---- {m} ----\n{body.strip()}\n")
    clash = set(seen) & {local for names in imports.values() for local in names}
    if clash:
        raise BundleError(f"imported and declared both: {', '.join(sorted(clash))}")
    # V8's compile hint, which must open the file: every function compiled as the file is read, off the
    # main thread (each module's own first line says the same, and is only a comment further down).
    head = [f"{COMPILE_HINT}\n", f"// The hub wrote this file from {', '.join(written)} (agentplaza/api/console_bundle.py).\n"]
    for target in (m for m in order if m in imports):
        specs = ", ".join(n if n == local else f"{n} as {local}" for local, n in sorted(imports[target].items()))
        head.append(f'import {{{specs}}} from "{_relative(target)}";\n')
    text = "".join(head) + "\n" + "\n".join(bodies)
    into = set(written)
    rewritten = {}
    for m in sorted(modules - into):
        if any(t in into for t, _ in static[m]):
            rewritten[m] = IMPORT_LINE.sub(lambda x, m=m: _readdressed(m, x, into), texts[m]).encode()
    return Bundle(text.encode(), tuple(m for m in order if m in separate), tuple(written), rewritten)


def _readdressed(module: str, line: re.Match, into: set[str]) -> str:
    """An import line of ``module`` as served: one from a written-in module names main.js."""
    names, target = line.group(1), line.group(2)
    if _resolve(module, target) not in into:
        return line.group(0)
    main = posixpath.relpath(ROOT_MODULE, posixpath.dirname(module))
    return f'import {{{names}}} from "{main if main.startswith("../") else "./" + main}";'


def write_from(folder: Path) -> Bundle:
    """The bundle of the console installed in this folder."""
    modules = {p.relative_to(folder).as_posix() for p in (folder / "js").rglob("*.js")}
    return write(lambda m: (folder / m).read_text(encoding="utf-8"), modules)
