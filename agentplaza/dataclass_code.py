"""Each text of a dataclass's generated methods compiled once, and the code kept for the next process.

Every event class is a frozen dataclass (eventsourcing's metaclass), and the library makes each
aggregate's events twice (the class written in ``domain``, then its subclass on the aggregate's own
``Event``), so importing the domain built about 4,500 methods (``__init__``, ``__eq__``, ``__repr__``,
``__hash__``, ``__setattr__``, ``__delattr__``) from about 1,800 distinct texts.  ``dataclasses`` makes
each method by ``exec`` of its text; ``share`` hands it the code compiled once for that text (a code
object does not depend on the namespace it runs in), so every class still gets its own functions,
closing over its own fields, exactly as before.  ``dont_inherit`` keeps the compile flags of
``dataclasses`` itself (none), as its own ``exec`` of a string does.

Compiling those texts once a process was still 0.21-0.27 of the 1.0-1.2 CPU s the hub's import took
(issue 25: apid listens within 2 s).  So the code is kept, as Python keeps a module's bytecode: in a
file beside the ``agentplaza`` package's (``CACHE_NAME`` in its ``__pycache__``), marshalled, under the
interpreter's bytecode magic number.  A process loads it at its first dataclass and compiles only the
texts it does not hold; one that compiled any writes the file again (``save``: at the hub's listening,
and at exit) with every text it holds, those it loaded and its own, up to ``CACHE_TEXTS_MAX``.  As for
bytecode, nothing is written where Python writes none (``sys.dont_write_bytecode``) or where the folder
cannot be written; a file with another magic number, or one that cannot be read, is as no file.

The file is trusted as the package's bytecode beside it is, and no more: whoever can write that folder
can already replace any module's ``.pyc``.  It is written with this process's own, private mode.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType
from typing import Any

#: The kept code's file, in the ``__pycache__`` of this package (``cache_tag``: cpython-311 ...).
CACHE_NAME = f"dataclass-code.{sys.implementation.cache_tag}.marshal"
#: The most texts the file keeps (the hub's import has about 1,800); past it, the file starts again from none.
CACHE_TEXTS_MAX = 20_000

_compiled: dict[str, CodeType] = {}
_loaded = False
_new = 0  # texts compiled here that the file did not hold


def cache_file() -> Path | None:
    """Where the kept code is: beside this package's bytecode (``sys.pycache_prefix`` honoured)."""
    try:
        return Path(importlib.util.cache_from_source(__file__)).parent / CACHE_NAME
    except (NotImplementedError, ValueError):  # no bytecode at all in this interpreter
        return None


def _load() -> None:
    global _loaded
    _loaded = True
    path = cache_file()
    if path is None:
        return
    try:
        data = path.read_bytes()
        magic = importlib.util.MAGIC_NUMBER
        if not data.startswith(magic):
            return
        kept = marshal.loads(data[len(magic):])
    except (OSError, EOFError, ValueError, TypeError):
        return
    if type(kept) is dict:
        _compiled.update((text, code) for text, code in kept.items()
                         if type(text) is str and type(code) is CodeType)


def code_for(text: str) -> CodeType:
    """The code of one text of a dataclass's methods: kept, loaded, or compiled now."""
    global _new
    code = _compiled.get(text)
    if code is None:
        if not _loaded:
            _load()
            code = _compiled.get(text)
        if code is None:
            code = _compiled[text] = compile(text, "<string>", "exec", dont_inherit=True)
            _new += 1
    return code


def _exec_shared(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    builtins.exec(code_for(source) if type(source) is str else source, globals, locals)


def share() -> None:
    """Make ``dataclasses`` run the kept code for each text (before any of the plaza's event classes is made)."""
    if "exec" in vars(dataclasses):
        return  # already shared (or another library has taken the name)
    dataclasses.exec = _exec_shared  # type: ignore[attr-defined]
    atexit.register(save)


def save(*, force: bool = False) -> bool:
    """Write the kept code when this process compiled a text the file did not hold (``force``: even where
    Python writes no bytecode, as ``compileall`` does); whether it was written.  Atomic: the file is whole
    or as it was, whatever another process writes beside it."""
    global _new
    path = cache_file()
    if path is None or not _new or (sys.dont_write_bytecode and not force):
        return False
    kept = _compiled if len(_compiled) <= CACHE_TEXTS_MAX else {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".dataclass-code.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(importlib.util.MAGIC_NUMBER + marshal.dumps(kept))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return False  # a folder this process cannot write: the next start compiles, as without the file
    _new = 0
    return True
