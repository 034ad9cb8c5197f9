"""The attacker's web site: a page and its script (attacker.js), served from another origin."""

from __future__ import annotations

import http.server
import threading
from contextlib import contextmanager
from pathlib import Path

#: A name the browser resolves to the hub's address, as a rebound DNS name would.
REBIND_HOST = "rebind.evil.example"
ATTACKER_JS = (Path(__file__).parent / "attacker.js").read_text()
SHELL = """<!doctype html>
<html><head><meta charset="utf-8"><title>A page on another site</title></head>
<body><p>Nothing to see here.</p>
<script>window.APZ_ATTACK = JSON.parse(new URLSearchParams(location.search).get("cfg"));</script>
<script src="/attacker.js"></script>
</body></html>
"""
PAGES = {"/": ("text/html", SHELL), "/attacker.js": ("text/javascript", ATTACKER_JS)}


class _Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path not in PAGES:
            self.send_error(404)
            return
        kind, text = PAGES[path]
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving(addresses: tuple[str, ...]):
    """The site on each address, on a port of its own: {address: port}."""
    servers = [http.server.ThreadingHTTPServer((address, 0), _Site) for address in addresses]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        yield {s.server_address[0]: s.server_address[1] for s in servers}
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
