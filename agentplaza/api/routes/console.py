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

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import error_response

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


def _serve(path: Path) -> Response:
    return Response(path.read_bytes(), media_type=MEDIA_TYPES[path.suffix],
                    headers={"content-security-policy": CONSOLE_CSP})


async def front_page(request: Request) -> Response:
    return _serve(CONSOLE_DIR / "index.html")


async def asset(request: Request) -> Response:
    path = _file(request.path_params["path"])
    if path is None:
        return error_response(404, "not_found", f"no console file {request.url.path}")
    return _serve(path)


ROUTES = [
    Route("/", front_page, methods=["GET"]),
    Route(ASSETS_PREFIX + "{path:path}", asset, methods=["GET"]),
]
