#!/usr/bin/python3
"""The agent harness: the program in the guest that runs the agent's loop.

It talks only over the channel (``/run/apz/channel.sock``, service ``harness``), one JSON object a
line, request then answer. It holds no key and no role: the hub says who the agent is. The loop:

1. ``hello`` (the hub answers with the agent's cid, role, name and the tools it is offered);
2. ``next``: wait for a work item;
3. ``model``: ask the model (the hub's gateway) what to do, with the conversation so far;
4. for each tool the model picks: a guest tool (``vm.*``) is first ``decide``d by the hub's laws,
   then run here and its ``result`` reported; a library tool (``x_<name>``) is ``decide``d the same way,
   and the hub's allow carries its program, which runs here (``tool_library``); a host tool goes to the
   hub as ``tool``;
5. repeat 3-4 until the model answers without a tool, then ``done``.

Guest tools: ``vm.shell`` (a command with a time limit), ``vm.read_file``, ``vm.list_dir``, ``vm.write_file``,
``vm.edit_file`` (confined to the workspace), ``vm.share_file`` (sends a workspace file to the hub), and the web
tools: ``vm.fetch`` (a page, as readable text), ``vm.download`` (a file into the workspace, with its sha256) and
``vm.install`` (pip packages into the agent's user site, or the guest's own apt packages). Outbound web traffic goes
through a local proxy at 127.0.0.1:3128 that carries each connection to the hub's egress proxy (service ``egress``):
a ``CONNECT`` as it is, a plain-HTTP proxy request (pip's and apt's, for an ``http://`` index) as a ``CONNECT`` to
its host and the request in origin form. Nothing in the guest reaches the network any other way.

Standard library only; it never imports anything of the hub. What it shares with the hub (ops,
limits, the error shape, the services) is ``contract.py``, beside it in the image.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

# What only a tool needs, that tool imports (http.client, ssl, re...: ~2.6 CPU-s under TCG before a hello).
if __package__:  # imported from the hub's tree (vmm.guest.harness)
    from . import contract
else:  # run in the guest, where contract.py sits beside this file
    import contract

SHELL_TIMEOUT_S, SHELL_MAX_TIMEOUT_S = contract.SHELL_TIMEOUT_S, contract.SHELL_MAX_TIMEOUT_S
MAX_OUTPUT, MAX_FILE = contract.MAX_OUTPUT, contract.MAX_FILE
PLACEHOLDER_KEY = contract.PLACEHOLDER_KEY
CHANNEL_SOCK = os.environ.get("APZ_CHANNEL_SOCK", contract.CHANNEL_SOCK)
WORKSPACE = os.environ.get("APZ_WORKSPACE", "/workspace")
#: Where the library tools' programs are written (one folder per tool and version): on the agent's own
#: disk (the guest's root is read-only).
TOOLS_DIR = os.environ.get("APZ_TOOLS_DIR", os.path.join(WORKSPACE, ".apz", "tools"))
PROXY_PORT = 3128
#: Model turns per work item before the harness gives up on it (the hub may allow more: /extend-turns).
MAX_STEPS = contract.MAX_TURNS
#: How long one ``next`` asks the hub to wait for work (at most the contract's MAX_NEXT_WAIT_S).
WAIT_S = 20


class ToolError(Exception):
    pass


class ItemCancelled(Exception):
    """The hub cancelled the work item (STOP ALL): stop it now."""


def log(msg: str) -> None:
    print(f"apz-harness: {msg}", flush=True)


# -- the channel ------------------------------------------------------------------------------------
def open_service(service: str, path: str = CHANNEL_SOCK) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(service.encode() + b"\n")
    return s


class Hub:
    """The harness's line to the hub: one JSON request, one JSON answer."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.lock = threading.Lock()

    def call(self, op: str, **fields) -> dict:
        with self.lock:
            self.sock.sendall(json.dumps(dict(fields, op=op)).encode() + b"\n")
            line = self.rfile.readline()
        if not line:
            raise ConnectionError("the hub closed the harness stream")
        return contract.answer(line)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# -- guest tools ------------------------------------------------------------------------------------
def confined(path: str, workspace: str = None) -> str:
    """The real path of ``path`` inside the workspace; refused if it leaves it."""
    ws = os.path.realpath(workspace or WORKSPACE)
    if not isinstance(path, str) or not path:
        raise ToolError("a path is needed")
    full = os.path.realpath(os.path.join(ws, path))
    if full != ws and not full.startswith(ws + os.sep):
        raise ToolError(f"{path} is outside {workspace or WORKSPACE}")
    return full


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + f"\n… ({len(text) - MAX_OUTPUT} more characters)"


#: Who the agent's commits name: its name and CID, set once the hub answers hello (``git_identity``).
GIT_IDENTITY: dict[str, str] = {}


def git_identity(name: str, cid) -> None:
    email = f"agent-{cid}@agents.plaza.invalid"
    GIT_IDENTITY.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                         "GIT_COMMITTER_EMAIL": email})


def shell_env() -> dict:
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": WORKSPACE,
            "LANG": "C.UTF-8", "http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy,
            "HTTPS_PROXY": proxy, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY, "OPENAI_API_KEY": PLACEHOLDER_KEY, **GIT_IDENTITY}


def tool_shell(args: dict, workspace: str = None) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("vm.shell needs a command")
    timeout = args.get("timeout", SHELL_TIMEOUT_S)
    if not isinstance(timeout, (int, float)) or not 0 < timeout <= SHELL_MAX_TIMEOUT_S:
        raise ToolError(f"timeout is 1 to {SHELL_MAX_TIMEOUT_S} seconds")
    ws = workspace or WORKSPACE
    import subprocess
    try:
        p = subprocess.run(["/bin/sh", "-c", command], cwd=ws, env=shell_env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           start_new_session=True)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace")
        raise ToolError(f"timed out after {timeout} s\n{_clip(out)}") from None
    return f"exit {p.returncode}\n" + _clip(p.stdout.decode(errors="replace"))


def tool_read_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ToolError(f"{args.get('path')} is larger than {MAX_FILE} bytes")
    return _clip(data.decode(errors="replace"))


def tool_list_dir(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path") or ".", workspace)
    if not os.path.isdir(full):
        raise ToolError(f"no folder {args.get('path')}")
    names = sorted(n + ("/" if os.path.isdir(os.path.join(full, n)) else "") for n in os.listdir(full))
    return "\n".join(names)


def tool_write_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("vm.write_file needs content")
    if len(content.encode()) > MAX_FILE:
        raise ToolError(f"a file is at most {MAX_FILE} bytes")
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tmp = full + ".apz-tmp"
    with open(tmp, "w") as f:
        f.write(content)
    os.replace(tmp, full)
    return f"wrote {len(content.encode())} bytes to {args['path']}"


def tool_edit_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    old, new = args.get("old"), args.get("new")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        raise ToolError("vm.edit_file needs old and new text")
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full) as f:
        text = f.read()
    n = text.count(old)
    if n != 1:
        raise ToolError(f"the old text occurs {n} times; it must occur exactly once")
    return tool_write_file({"path": args["path"], "content": text.replace(old, new)}, workspace)


def tool_share_file(args: dict, workspace: str = None, hub: Hub = None) -> str:
    full = confined(args.get("path"), workspace)
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ToolError(f"a shared file is at most {MAX_FILE} bytes")
    if hub is None:
        raise ToolError("no hub to share with")
    agents = args.get("agents")
    if agents is not None and (not isinstance(agents, list) or not all(type(a) is int for a in agents)):
        raise ToolError("agents is a list of CIDs")
    import base64
    r = hub.call("share", path=args["path"], content=base64.b64encode(data).decode(),
                 **({"agents": agents} if agents is not None else {}))
    err = contract.error_of(r)
    if err is not None:
        raise ToolError(err["message"] or "the hub refused the file")
    return f"shared {args['path']} ({len(data)} bytes) as {r.get('name')}"


# -- the tool library: an approved program (x_<name>), sent by the hub with the laws' allow, run here ----
def tool_library(tool: str, args: dict, program: dict, workspace: str = None) -> str:
    """Run a library tool's program in this VM: written once under ``TOOLS_DIR`` (checked against the
    digest the hub sent), run in the workspace with ``args`` and ``input``, with vm.shell's limits."""
    import base64
    import hashlib
    import subprocess
    data = base64.b64decode(program.get("content") or "", validate=True)
    digest = hashlib.sha256(data).hexdigest()
    if digest != program.get("sha256"):
        raise ToolError(f"{tool}: the program does not match its digest")
    filename = os.path.basename(str(program.get("filename") or "program")) or "program"
    folder = os.path.join(TOOLS_DIR, tool, f"v{int(program.get('version') or 0)}-{digest[:16]}")
    path = os.path.join(folder, filename)
    if not os.path.isfile(path):
        os.makedirs(folder, mode=0o755, exist_ok=True)
        with open(path + ".part", "wb") as f:
            f.write(data)
        os.chmod(path + ".part", 0o755)
        os.replace(path + ".part", path)
    argv = [str(a) for a in args.get("args") or []]
    if data.startswith(b"#!"):
        cmd = [path, *argv]
    elif filename.endswith(".py"):
        cmd = [sys.executable, path, *argv]
    else:
        cmd = ["/bin/sh", path, *argv]
    timeout = args.get("timeout", SHELL_TIMEOUT_S)
    if not isinstance(timeout, (int, float)) or not 0 < timeout <= SHELL_MAX_TIMEOUT_S:
        raise ToolError(f"timeout is 1 to {SHELL_MAX_TIMEOUT_S} seconds")
    stdin = args.get("input")
    try:
        p = subprocess.run(cmd, cwd=workspace or WORKSPACE, env=shell_env(),
                           input=(stdin if isinstance(stdin, str) else "").encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        raise ToolError(f"timed out after {timeout} s\n{_clip((e.output or b'').decode(errors='replace'))}") from None
    except OSError as e:
        raise ToolError(f"cannot run {tool}: {e}") from None
    return f"exit {p.returncode}\n" + _clip(p.stdout.decode(errors="replace"))


# -- the web tools: every connection through the local proxy, so the hub's egress decides each one ------
class Out(str):
    """A tool's output with what the transcript records beside it (``contract.RESULT_META``)."""

    meta: dict = {}

    @classmethod
    def of(cls, text: str, **meta) -> Out:
        o = cls(text)
        o.meta = meta
        return o


class Refused(ToolError):
    """The hub's egress proxy refused the connection (the blocklist, the laws, the address or port rule)."""


def web_url(url):
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise ToolError("a url is needed (http:// or https://, at most 2048 characters)")
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ToolError(f"{url} is not an http:// or https:// URL")
    try:
        if u.port == 0:
            raise ValueError
    except ValueError:
        raise ToolError(f"{url} has a bad port") from None
    if u.username or u.password:
        raise ToolError("a URL with a user name or password is refused")
    return u


def tunnel(host: str, port: int, timeout: float, proxy_port: int = None) -> socket.socket:
    """A connection to host:port through the hub's egress proxy (the local forwarder's ``CONNECT``)."""
    s = socket.create_connection(("127.0.0.1", proxy_port or PROXY_PORT), timeout=timeout)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
        if len(head) > 16384:
            break
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode(errors="replace").split(" ", 2)
    if len(parts) < 2 or parts[1] != "200":
        body = rest.partition(b"\r\n\r\n")[2].decode(errors="replace").strip()
        s.close()
        raise Refused(f"the plaza's egress refused {target}: {body or line.decode(errors='replace')}")
    return s


def web_get(url: str, timeout: float = None, proxy_port: int = None):
    """GET through the egress proxy, following up to ``MAX_REDIRECTS`` redirects (each one decided
    anew). Returns (final url, response, connection, started)."""
    import http.client
    import ssl
    import urllib.parse
    timeout = timeout or contract.FETCH_TIMEOUT_S
    t0 = time.monotonic()
    for _ in range(contract.MAX_REDIRECTS + 1):
        u = web_url(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        sock = tunnel(u.hostname, port, timeout, proxy_port)
        try:
            if u.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
            conn = http.client.HTTPConnection(u.hostname, port, timeout=timeout)
            conn.sock = sock
            path = (u.path or "/") + (f"?{u.query}" if u.query else "")
            conn.request("GET", path, headers={"User-Agent": "agentplaza-agent/1", "Accept": "*/*",
                                               "Accept-Encoding": "identity", "Connection": "close"})
            r = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            sock.close()
            raise ToolError(f"{url}: {type(e).__name__}: {e}") from None
        location = r.getheader("Location")
        if r.status in (301, 302, 303, 307, 308) and location:
            conn.close()
            url = urllib.parse.urljoin(url, location)
            continue
        return url, r, conn, t0
    raise ToolError(f"more than {contract.MAX_REDIRECTS} redirects")


def html_text(markup: str) -> tuple:
    """(title, text) of an HTML page as a reader sees it: no markup, script or style, blank lines dropped."""
    import html.parser
    import re

    class Text(html.parser.HTMLParser):
        SKIP = {"script", "style", "noscript", "template", "svg", "head"}
        BLOCK = {"p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer",
                 "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "hr", "dt", "dd", "title", "main", "nav"}

        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.parts, self.skip, self.title, self._in_title = [], 0, "", False

        def handle_starttag(self, tag, attrs):
            if tag == "title":
                self._in_title = True
            elif tag in self.SKIP:
                self.skip += 1
            if tag in self.BLOCK:
                self.parts.append("\n")

        def handle_endtag(self, tag):
            if tag == "title":
                self._in_title = False
            elif tag in self.SKIP and self.skip:
                self.skip -= 1
            if tag in self.BLOCK:
                self.parts.append("\n")

        def handle_data(self, data):
            if self._in_title:
                self.title += data
            elif not self.skip:
                self.parts.append(data)

    p = Text()
    p.feed(markup)
    p.close()
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(p.parts).split("\n"))
    return " ".join(p.title.split()), "\n".join(line for line in lines if line)


def _charset(content_type: str) -> str:
    import codecs
    import re
    m = re.search(r"charset=([A-Za-z0-9._-]+)", content_type or "")
    if m is None:
        return "utf-8"
    try:
        return codecs.lookup(m.group(1)).name
    except LookupError:
        return "utf-8"


def tool_fetch(args: dict, workspace: str = None, proxy_port: int = None) -> Out:
    url = args.get("url")
    limit = args.get("max_bytes", contract.FETCH_MAX_BYTES)
    if type(limit) is not int or not 0 < limit <= contract.FETCH_MAX_BYTES:
        raise ToolError(f"max_bytes is 1 to {contract.FETCH_MAX_BYTES}")
    final, r, conn, t0 = web_get(url, proxy_port=proxy_port)
    try:
        data = r.read(limit + 1)
    finally:
        conn.close()
    cut = len(data) > limit
    data = data[:limit]
    ctype = r.getheader("Content-Type") or ""
    kind = ctype.split(";")[0].strip().lower()
    host = web_url(final).hostname
    head = [f"URL: {final}", f"status: {r.status}", f"content type: {ctype or '(none)'}",
            f"bytes: {len(data)}" + (f" (cut at {limit})" if cut else "")]
    if kind in ("text/html", "application/xhtml+xml") or (not kind and b"<html" in data[:1024].lower()):
        title, text = html_text(data.decode(_charset(ctype), errors="replace"))
        if title:
            head.append(f"title: {title}")
    elif kind.startswith("text/") or kind in ("application/json", "application/xml", "application/javascript") \
            or kind.endswith("+json") or kind.endswith("+xml"):
        text = data.decode(_charset(ctype), errors="replace")
    else:
        text = f"(binary content, {len(data)} bytes: use vm.download to save it)"
    ms = int((time.monotonic() - t0) * 1000)
    return Out.of("\n".join(head) + "\n\n" + _clip(text), url=final, host=host, status=r.status,
                  content_type=ctype[:100], bytes=len(data), ms=ms)


def tool_download(args: dict, workspace: str = None, proxy_port: int = None) -> Out:
    full = confined(args.get("path"), workspace)
    if os.path.isdir(full):
        raise ToolError(f"{args.get('path')} is a folder")
    limit = contract.DOWNLOAD_MAX_BYTES
    final, r, conn, t0 = web_get(args.get("url"), proxy_port=proxy_port)
    tmp = full + ".apz-download"
    import hashlib
    digest, n = hashlib.sha256(), 0
    try:
        if not 200 <= r.status < 300:
            raise ToolError(f"{final} answered status {r.status}; nothing was saved")
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(tmp, "wb") as f:
            while True:
                chunk = r.read(65536)
                if not chunk:
                    break
                n += len(chunk)
                if n > limit:
                    raise ToolError(f"{final} is larger than {limit} bytes; nothing was saved")
                digest.update(chunk)
                f.write(chunk)
        os.replace(tmp, full)
    except OSError as e:
        raise ToolError(f"{final}: {type(e).__name__}: {e}") from None
    finally:
        conn.close()
        if os.path.exists(tmp):
            os.remove(tmp)
    ctype = r.getheader("Content-Type") or ""
    ms = int((time.monotonic() - t0) * 1000)
    return Out.of(f"downloaded {n} bytes to {args['path']} from {final} (status {r.status}, "
                  f"content type {ctype or '(none)'})\nsha256: {digest.hexdigest()}",
                  url=final, host=web_url(final).hostname, status=r.status, content_type=ctype[:100], bytes=n,
                  ms=ms, sha256=digest.hexdigest(), path=args["path"])


def packages_of(args: dict) -> list:
    """The packages of a ``vm.install`` call, each checked: a name, never an option."""
    packages = args.get("packages")
    if isinstance(packages, str):  # "requests numpy" or "requests, numpy"
        packages = packages.replace(",", " ").split()
    if not isinstance(packages, list) or not 0 < len(packages) <= contract.INSTALL_MAX_PACKAGES:
        raise ToolError(f"packages is a list of 1 to {contract.INSTALL_MAX_PACKAGES} names")
    import re
    for p in packages:
        if not isinstance(p, str) or not re.fullmatch(contract.PACKAGE_PATTERN, p):
            raise ToolError(f"{p!r} is not a package name (like requests or requests==2.32.3)")
    return packages


def install_command(args: dict) -> list:
    """The argv ``vm.install`` runs: checked names only, never an option the model wrote."""
    manager = args.get("manager", "pip")
    if manager not in contract.INSTALL_MANAGERS:
        raise ToolError(f"manager is one of {', '.join(contract.INSTALL_MANAGERS)}")
    packages = packages_of(args)
    index = args.get("index_url")
    if manager == "apt":
        if index is not None:
            raise ToolError("index_url is for pip only")
        return ["sh", "-c", 'apt-get update -qq && exec apt-get install -y -q --no-install-recommends -- "$@"',
                "apt", *packages]
    argv = [sys.executable, "-m", "pip", "install", "--user", "--break-system-packages", "--no-input",
            "--disable-pip-version-check", "--progress-bar", "off"]
    if index is not None:
        u = web_url(index)
        argv += ["--index-url", index]
        if u.scheme == "http":  # the hub's egress still decides the host; pip only asks to be told
            argv += ["--trusted-host", u.hostname]
    return argv + packages  # each checked above: none can be an option


def tool_install(args: dict, workspace: str = None) -> Out:
    argv = install_command(args)
    t0 = time.monotonic()
    env = dict(shell_env(), DEBIAN_FRONTEND="noninteractive", PIP_NO_CACHE_DIR="1")
    import subprocess
    try:
        p = subprocess.run(argv, cwd=workspace or WORKSPACE, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=contract.INSTALL_TIMEOUT_S,
                           start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ToolError(f"the install took longer than {contract.INSTALL_TIMEOUT_S} s") from None
    except OSError as e:
        raise ToolError(f"cannot run {argv[0]}: {e}") from None
    out = p.stdout.decode(errors="replace")
    manager = args.get("manager", "pip")
    if p.returncode != 0:
        raise ToolError(f"{manager} install failed (exit {p.returncode})\n{_clip(out[-MAX_OUTPUT:])}")
    host = web_url(args["index_url"]).hostname if args.get("index_url") else None
    names = packages_of(args)
    return Out.of(f"installed {', '.join(names)} with {manager}\n" + _clip(out[-MAX_OUTPUT:]),
                  manager=manager, packages=", ".join(names)[:200], host=host,
                  ms=int((time.monotonic() - t0) * 1000))


GUEST_TOOLS = {"vm.shell": tool_shell, "vm.read_file": tool_read_file, "vm.list_dir": tool_list_dir,
               "vm.write_file": tool_write_file, "vm.edit_file": tool_edit_file, "vm.fetch": tool_fetch,
               "vm.download": tool_download, "vm.install": tool_install}


def run_guest_tool(tool: str, args: dict, hub: Hub = None, workspace: str = None) -> str:
    if tool == "vm.share_file":
        return tool_share_file(args, workspace, hub)
    fn = GUEST_TOOLS.get(tool)
    if fn is None:
        raise ToolError(f"no guest tool {tool}")
    return fn(args, workspace)


# -- the egress forwarder ---------------------------------------------------------------------------
def splice(a: socket.socket, b: socket.socket) -> None:
    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


#: Request headers a proxy request carries that the origin server must not see.
HOP_HEADERS = ("proxy-connection", "proxy-authorization", "connection", "keep-alive")


def as_connect(conn: socket.socket, up: socket.socket) -> bool:
    """The first request on a connection to the egress forwarder: a ``CONNECT`` goes as it is; a plain
    proxy request (``GET http://host:port/path HTTP/1.1``, as pip and apt send for an http:// index)
    becomes a ``CONNECT host:port`` (the hub's egress decides it like any other) and then the request in
    origin form, with ``Connection: close`` (one request a tunnel). True: splice the rest."""
    head = b""
    conn.settimeout(30)
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(8192)
        if not chunk:
            conn.close()
            up.close()
            return False
        head += chunk
        if len(head) > 65536:
            conn.sendall(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
            conn.close()
            up.close()
            return False
    conn.settimeout(None)
    if head.startswith(b"CONNECT "):
        up.sendall(head)
        return True
    first, _, rest = head.partition(b"\r\n")
    parts = first.decode("latin-1").split(" ")
    import urllib.parse
    u = urllib.parse.urlsplit(parts[1]) if len(parts) == 3 else None
    if u is None or u.scheme != "http" or not u.hostname:
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\nthe proxy takes CONNECT or "
                     b"an http:// URL\n")
        conn.close()
        up.close()
        return False
    port = u.port or 80
    target = f"[{u.hostname}]:{port}" if ":" in u.hostname else f"{u.hostname}:{port}"
    up.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = up.recv(8192)
        if not chunk:
            break
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):  # refused: the client reads the hub's answer and why
        conn.sendall(answer or b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
        splice(conn, up)
        return False
    headers, _, body = rest.partition(b"\r\n\r\n")
    kept = [h for h in headers.split(b"\r\n") if h and h.split(b":", 1)[0].strip().lower().decode("latin-1")
            not in HOP_HEADERS]
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    request = f"{parts[0]} {path} {parts[2]}\r\n".encode("latin-1") + b"\r\n".join(kept + [b"Connection: close"])
    up.sendall(request + b"\r\n\r\n" + body)
    return True


def forwarder(port: int = PROXY_PORT, service: str = "egress") -> None:
    """127.0.0.1:port in the guest: every connection goes, as it is, to the hub's ``service`` (the egress
    proxy; the git server on ``contract.GIT_PORT``)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)

    def carry(conn: socket.socket) -> None:
        try:
            up = open_service(service)
        except OSError:
            conn.close()
            return
        if service == "egress":
            try:
                if not as_connect(conn, up):
                    return
            except OSError:
                conn.close()
                up.close()
                return
        splice(conn, up)

    def serve():
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=carry, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


# -- the loop ---------------------------------------------------------------------------------------
def run_item(hub: Hub, item: dict, tools: list) -> None:
    try:
        _run_item(hub, item, tools)
    except ItemCancelled as e:
        log(f"item {item.get('item')} cancelled: {e}")
        hub.call("done", item=item["item"], outcome="cancelled", text=str(e))


def _checked(r: dict) -> dict:
    err = contract.error_of(r)
    if err is not None and err["code"] == contract.ITEM_CANCELLED:
        raise ItemCancelled(err["message"] or "cancelled")
    return r


def _run_item(hub: Hub, item: dict, tools: list) -> None:
    messages = [{"role": "user", "content": item.get("text", "")}]
    turns, allowed = 0, MAX_STEPS
    while turns < allowed:
        turns += 1
        r = _checked(hub.call("model", item=item["item"], messages=messages, tools=tools))
        err = contract.error_of(r)
        if err is not None:
            hub.call("done", item=item["item"], outcome="cancelled" if err["code"] in contract.CANCELLING else "failed",
                     text=err["message"] or "the model call failed")
            return
        messages, allowed = _adopted(r, messages, allowed)
        reply = r.get("reply") or {}
        calls = reply.get("tool_calls") or []
        messages.append({"role": "assistant", "content": reply.get("text") or "", "tool_calls": calls})
        if not calls:
            hub.call("done", item=item["item"], outcome="done", text=reply.get("text") or "")
            return
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": do_call(hub, call)})
    hub.call("done", item=item["item"], outcome="failed", text=f"gave up after {allowed} model turns")


def _adopted(r: dict, messages: list, allowed: int) -> tuple[list, int]:
    """The conversation and the turns allowed, as the hub's answer changed them (the editor's slash commands)."""
    conv, more = r.get(contract.CONVERSATION), r.get(contract.MORE_TURNS)
    if isinstance(conv, list) and all(isinstance(m, dict) for m in conv):
        messages = conv
    if isinstance(more, int) and not isinstance(more, bool) and more > 0:
        allowed = min(allowed + more, contract.MAX_TURNS_ALLOWED)
    return messages, allowed


def do_call(hub: Hub, call: dict) -> str:
    tool, args, cid = call.get("name"), call.get("args") or {}, call.get("id")
    if not isinstance(tool, str) or not isinstance(args, dict):
        return "error: a tool call needs a name and arguments"
    if tool.startswith(("vm.", "x_")):
        d = _checked(hub.call("decide", tool=tool, args=args, call_id=cid))
        err = contract.error_of(d)
        if err is not None:
            return "error: " + (err["message"] or "refused")
        if d.get("effect") == "ask":
            return f"waiting: {d.get('message')}"
        if d.get("effect") != "allow":
            return f"error: refused by the plaza: {d.get('message') or d.get('reason')}"
        try:
            if tool.startswith("x_"):
                out, ok = tool_library(tool, args, d.get("program") or {}), True
            else:
                out, ok = run_guest_tool(tool, args, hub), True
        except ToolError as e:
            out, ok = f"error: {e}", False
        except Exception as e:  # a tool must never take the harness down
            out, ok = f"error: {type(e).__name__}: {e}", False
        meta = {k: v for k, v in getattr(out, "meta", {}).items() if k in contract.RESULT_META and v is not None}
        _checked(hub.call("result", tool=tool, call_id=cid, ok=ok, output=str(out), **({"meta": meta} if meta else {})))
        return str(out)
    r = _checked(hub.call("tool", tool=tool, args=args, call_id=cid))
    err = contract.error_of(r)
    if err is not None:
        if err["code"] == contract.AWAITING_APPROVAL:
            return "waiting: " + err["message"]
        return "error: " + (err["message"] or "refused")
    return json.dumps(r.get("result"))


def name_self(hub: Hub, prompt: str) -> str | None:
    """The plaza asks a new agent to name itself, once: the model answers, the hub keeps the name in it
    (or gives the agent role-cid when the answer holds none, or the call failed)."""
    r = hub.call("model", purpose="name", messages=[{"role": "user", "content": prompt}], tools=[])
    answer = (r.get("reply") or {}).get("text") if contract.error_of(r) is None else ""
    named = hub.call("name", name=answer or "")
    err = contract.error_of(named)
    log(f"named {named.get('name')}" if err is None else f"not named: {err['message']}")
    return named.get("name") if err is None else None


def main() -> int:
    os.makedirs(WORKSPACE, exist_ok=True)
    for port, service in ((PROXY_PORT, "egress"), (contract.GIT_PORT, "git")):
        try:
            forwarder(port, service)
        except OSError as e:
            log(f"no {service} forwarder: {e}")
    contract.unparked()   # a harness the node parked in a warm template waits here until it is let go
    backoff = 0.5
    while True:
        try:
            hub = Hub(open_service("harness"))
            me = hub.call("hello", version=1)
            refused = contract.error_of(me)
            if refused is not None:
                log(f"the hub refused us: {refused['code']}: {refused['message']}")
                hub.close()
                time.sleep(5)
                continue
            backoff = 0.5
            log(f"connected as cid {me['cid']} ({me['role']})")
            git_identity(me.get("name") or f"{me['role']}-{me['cid']}", me["cid"])
            if me.get("name_prompt"):
                git_identity(name_self(hub, me["name_prompt"]) or f"{me['role']}-{me['cid']}", me["cid"])
            tools = me.get("tools") or []
            while True:
                r = hub.call("next", wait=WAIT_S)
                if r.get("item"):
                    run_item(hub, r["item"], tools)
        except (OSError, ConnectionError, ValueError) as e:
            backoff = 0.0 if isinstance(e, contract.Restored) else backoff   # restored under a new host: at once
            log(f"lost the hub: {e}; again in {backoff:g} s")
            time.sleep(backoff)
            backoff = min(max(backoff * 2, 0.5), 10)


if __name__ == "__main__":
    sys.exit(main())
