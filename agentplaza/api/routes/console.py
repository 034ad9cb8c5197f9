"""The web console: the plaza in a browser, served by the hub at ``/`` from files installed with the package.

The console is plain ES modules and CSS (``agentplaza/api/console/``): no build step, no Node, nothing
fetched from anywhere but this hub.  Its files hold no plaza data, so they are open to every caller that
passed the door (the sign-in page must load before there is a session); every screen then reads and
changes the plaza through ``/v1`` and listens on ``/v1/ws`` like the command line.

The pages get their own strict policy (``CONSOLE_CSP``): scripts and styles from this origin only (no
inline script, no ``eval``), requests and the socket to this origin only, images from here or ``data:``/
``blob:``, no plugin, no form posted anywhere, never framed.  The edge adds ``X-Frame-Options: DENY``,
``nosniff``, ``no-referrer`` and ``no-store`` to every answer.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import re
import time
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import console_bundle
from ..errors import error_response

log = logging.getLogger(__name__)

#: Where the console's files are installed.
CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
#: The URL prefix of the console's files (the front page is ``/``).
ASSETS_PREFIX = "/console/"
#: The console's files by kind: nothing else is served from the folder.
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: The Content-Security-Policy of the console's pages.  'self' in connect-src covers ws:/wss: to this host.
CONSOLE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
               "media-src 'self' blob:; font-src 'self'; connect-src 'self'; frame-src 'self'; "
               "form-action 'none'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'")


def _file(relative: str) -> Path | None:
    """The console file at this path, or None: no '..', no hidden file, no kind not in MEDIA_TYPES."""
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None
    path = (CONSOLE_DIR / relative).resolve()
    if CONSOLE_DIR not in path.parents or path.suffix not in MEDIA_TYPES or not path.is_file():
        return None
    return path


#: A console file asked for under the digest of all of them (``/console/<digest>/js/main.js``) never
#: changes at that address: the browser keeps it.  The front page itself, and a file asked for under no
#: digest or an old one, are not kept (the edge's ``no-store``).
IMMUTABLE = "public, max-age=31536000, immutable"
DIGEST_CHARS = 16

#: The front page's marker where the hub lists every module as a modulepreload link, so the browser
#: fetches them all at once instead of import by import (a screen's module included).
PRELOAD_MARKER = "<!-- the hub lists every module here as a modulepreload link (routes/console.py) -->"
_cache: dict[Path, tuple[float, bytes]] = {}


def _read(path: Path) -> bytes:
    """A console file's bytes, kept while its modification time stays (the files change only on an upgrade)."""
    mtime = path.stat().st_mtime
    kept = _cache.get(path)
    if kept is None or kept[0] != mtime:
        kept = _cache[path] = (mtime, path.read_bytes())
    return kept[1]


def _files() -> list[Path]:
    return sorted(p for p in CONSOLE_DIR.rglob("*") if p.is_file() and p.suffix in MEDIA_TYPES)


#: The digest of the console's files, main.js as served and the front page built on them are made once
#: and kept while the files stay as they are: hashing every file and writing main.js took some 11 ms of
#: the hub's time, and an owner's front page waited for it whenever it had not been asked for within the
#: last few seconds. Whether the files changed (an upgrade, a development checkout edited in place) is
#: read from their sizes and modification times (one directory walk, about 0.2 ms), at most once every
#: DIGEST_KEPT_S: a change is seen within that long.
DIGEST_KEPT_S = 2.0
_kept: dict[str, object] = {}
_checked: dict[str, object] = {"at": None, "files": None}


def _stamp() -> tuple:
    """Every console file's path, size and modification time."""
    out, folders = [], [str(CONSOLE_DIR)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    folders.append(e.path)
                elif os.path.splitext(e.name)[1] in MEDIA_TYPES:
                    st = e.stat()
                    out.append((e.path, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def _fresh(name: str, make):
    now = time.monotonic()
    if _checked["at"] is None or now - _checked["at"] > DIGEST_KEPT_S:
        _checked["at"] = now
        files = _stamp()
        if files != _checked["files"]:
            _checked["files"] = files
            _kept.clear()
    if name not in _kept:
        _kept[name] = make()
    return _kept[name]


def _digest() -> str:
    h = hashlib.sha256()
    for p in _files():
        h.update(p.relative_to(CONSOLE_DIR).as_posix().encode() + b"\0" + _read(p) + b"\0")
    b = bundle()  # main.js and the modules that import it as served: written otherwise, a new address
    if b is not None:
        h.update(b.text)
        for module, text in sorted(b.rewritten.items()):
            h.update(module.encode() + b"\0" + text + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


def digest() -> str:
    """The digest of every console file as installed: a new install, a new address for each file."""
    return _fresh("digest", _digest)


def _serve(path: Path, body: bytes | None = None, cache: str | None = None) -> Response:
    headers = {"content-security-policy": CONSOLE_CSP}
    if cache:
        headers["cache-control"] = cache
    return Response(_read(path) if body is None else body, media_type=MEDIA_TYPES[path.suffix], headers=headers)


#: The module the front page runs: the frame (``js/early.js``, which starts the opened screen's data, is a
#: classic script the parser runs at once: nothing to preload).  Under the digest it is served as the
#: hub writes it, with the modules of its static closure in it, api.js and ui.js included; the screens
#: that import those are served importing main.js instead (console_bundle.py).
FRONT_MODULE = console_bundle.ROOT_MODULE


def _bundle() -> console_bundle.Bundle | None:
    try:
        return console_bundle.write_from(CONSOLE_DIR)
    except (console_bundle.BundleError, OSError, UnicodeDecodeError) as e:
        log.warning("the console's frame is served as separate modules: %s", e)
        return None


def bundle() -> console_bundle.Bundle | None:
    """main.js, and the modules that import what it holds, as served under the digest; or None when a
    module breaks a rule the writing relies on (the files are then served as they are)."""
    return _fresh("bundle", _bundle)


def preload_order() -> list[str]:
    """The modules the front page preloads, all at once, each before the modules that import it: the
    modules main.js as served imports (none, unless one is imported with ``import()`` too), then main.js.  The screens are not preloaded: a browser fetches
    the preloads over its few connections and compiles each, and twenty screens the owner is not looking
    at delayed the one the owner is (bench/console.py).  The frame imports the screen it opens at once,
    and the others when the browser is idle (``frame.js``)."""
    b = bundle()
    if b is None:  # every module of the frame's static closure, as the files are
        every = {p.relative_to(CONSOLE_DIR).as_posix() for p in (CONSOLE_DIR / "js").rglob("*.js")}
        order: list[str] = []
        seen: set[str] = set()  # visited, even before it is in order (a cycle is one reason to be here)

        def visit(module: str) -> None:
            if module in seen or module not in every:
                return
            seen.add(module)
            base = posixpath.dirname(module)
            for target in STATIC_IMPORT.findall(_read(CONSOLE_DIR / module)):
                visit(posixpath.normpath(posixpath.join(base, target.decode())))
            order.append(module)

        visit(FRONT_MODULE)
        return order
    return [*b.separate, FRONT_MODULE]


#: A static import in a console module (``import {a} from "./x.js";``); ``import()`` of a screen is not one.
STATIC_IMPORT = re.compile(rb'^import\s[^;]*?from\s+"(\.{1,2}/[^"]+)";', re.M)


def _front_page() -> bytes:
    """index.html with every file under the current digest, and every module as a modulepreload link."""
    prefix = f"{ASSETS_PREFIX}{digest()}/"
    modules = preload_order()
    links = "\n".join(f'<link rel="modulepreload" href="{prefix}{m}">' for m in modules)
    page = _read(CONSOLE_DIR / "index.html").replace(f'"{ASSETS_PREFIX}'.encode(), f'"{prefix}'.encode())
    return page.replace(PRELOAD_MARKER.encode(), links.encode())


async def front_page(request: Request) -> Response:
    return _serve(CONSOLE_DIR / "index.html", _fresh("front page", _front_page))


async def asset(request: Request) -> Response:
    relative = request.path_params["path"]
    first, _, rest = relative.partition("/")
    cache = None
    if len(first) == DIGEST_CHARS and all(c in "0123456789abcdef" for c in first) and rest:
        relative, cache = rest, (IMMUTABLE if first == digest() else None)
    path = _file(relative)
    if path is None:
        return error_response(404, "not_found", f"no console file {request.url.path}")
    if cache and (b := bundle()) is not None:
        if relative == FRONT_MODULE:
            return _serve(path, b.text, cache=cache)
        if relative in b.rewritten:  # a screen's imports of api.js and ui.js name main.js, which holds them
            return _serve(path, b.rewritten[relative], cache=cache)
    return _serve(path, cache=cache)


ROUTES = [
    Route("/", front_page, methods=["GET"]),
    Route(ASSETS_PREFIX + "{path:path}", asset, methods=["GET"]),
]
