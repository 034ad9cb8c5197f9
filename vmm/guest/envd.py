"""envd: the sandbox side of the E2B SDK, inside a sandbox microVM.

The node gateway carries each SDK request to this guest over the channel: it opens a stream with the
service ``envd`` and writes one HTTP/1.1 request (with ``Content-Length``); this module answers it on the
same stream and closes it. It speaks what the E2B SDK's sandbox side speaks (E2B's open envd protocol,
Apache-2.0; this is our own implementation of it):

- ``GET /health`` (204), ``POST /init`` (the sandbox's environment variables; ``accessToken`` is
  accepted and not applied: the gateway checks the caller in its place), ``GET /envs``;
- ``GET /files?path=`` (a file's bytes) and ``POST /files?path=`` (multipart or octet-stream upload);
- Connect RPC with the JSON codec: ``process.Process`` (Start and Connect stream the process's events:
  start, data, end; List, SendInput, SendSignal, CloseStdin; a Start with ``pty`` runs the process on a
  pseudo-terminal of that size, its output streamed as ``pty`` data, its input sent as ``pty`` input,
  and Update resizes it: the SDK's ``sandbox.pty``) and ``filesystem.Filesystem``
  (Stat, MakeDir, Move, ListDir, Remove, WatchDir, CreateWatcher, GetWatcherEvents, RemoveWatcher).

Standard library only. The processes live as long as the guest does, so a paused sandbox woken from its
memory snapshot still has them. Paths are the guest's own; the guest is the sandbox, so it holds them.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import json
import os
import queue
import shutil
import signal
import socket
import stat
import struct
import subprocess
import termios
import threading
import time
import urllib.parse

#: The envd version this daemon answers as (the SDK picks its request shapes by it).
ENVD_VERSION = "0.5.1"
#: The sandbox user's home and the default working directory (the root filesystem is read-only).
HOME = "/workspace"
#: Outbound connections go through this local proxy, carried to the hub's egress proxy (service
#: ``egress``), where the sandbox's network rules and the laws (role ``sandbox``) decide each one.
PROXY_PORT = 3128
_PROXY = f"http://127.0.0.1:{PROXY_PORT}"
DEFAULT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": HOME, "LANG": "C.UTF-8", "USER": "user",
               "http_proxy": _PROXY, "https_proxy": _PROXY, "HTTP_PROXY": _PROXY, "HTTPS_PROXY": _PROXY,
               "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
#: The guest's door to the hub (channeld's unix socket; the first line names the service).
CHANNEL_SOCK = "/run/apz/channel.sock"
#: The longest request head and body the daemon reads.
HEAD_MAX, BODY_MAX = 64 << 10, 256 << 20
#: Connect's envelope flags: a compressed message (refused), the end of a stream.
FLAG_COMPRESSED, FLAG_END = 0x01, 0x02
#: How often a streaming answer sends a keepalive event when nothing else happened, in seconds.
KEEPALIVE_S = 25.0
#: The largest pseudo-terminal a PTY may ask for, in rows and in columns.
PTY_SIDE_MAX = 1000

_env: dict = {}
_procs: dict = {}
_lock = threading.Lock()
_watchers: dict = {}


class RpcError(Exception):
    """A Connect error: its code (``not_found``, ``invalid_argument`` ...) and message."""

    STATUS = {"invalid_argument": 400, "not_found": 404, "already_exists": 409, "permission_denied": 403,
              "unimplemented": 501, "internal": 500, "failed_precondition": 412, "unavailable": 503}

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


# -- processes ------------------------------------------------------------------------------------
def pty_size(pty: dict) -> tuple:
    """(rows, cols) of a request's ``pty`` (``{"size": {"rows", "cols"}}``), or RpcError."""
    size = (pty or {}).get("size") or {}
    try:
        rows, cols = int(size.get("rows") or 0), int(size.get("cols") or 0)
    except (TypeError, ValueError):
        rows = cols = 0
    if not (1 <= rows <= PTY_SIDE_MAX and 1 <= cols <= PTY_SIDE_MAX):
        raise RpcError("invalid_argument", f"a PTY's size is 1 to {PTY_SIDE_MAX} rows and columns")
    return rows, cols


def set_size(fd: int, rows: int, cols: int) -> None:
    """The terminal's size; the kernel tells its foreground processes (SIGWINCH)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


_pts_lock = threading.Lock()


def ensure_devpts() -> None:
    """The guest's init mounts no devpts (agents' guests use none): mounted once, at the first PTY."""
    with _pts_lock:
        if os.path.ismount("/dev/pts"):
            return
        os.makedirs("/dev/pts", exist_ok=True)
        done = subprocess.run(["mount", "-t", "devpts", "-o", "nosuid,noexec,gid=5,mode=620", "devpts", "/dev/pts"],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RpcError("internal", f"no pseudo-terminals in this guest: {done.stderr.strip()}")


def _ordinary_priority() -> None:
    """In the child: nice 0, not the priority of channeld, which this module runs in (channeld.NICE)."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)


def _controlling_tty() -> None:
    """In the child, after ``setsid``: its terminal (fd 0) becomes its controlling terminal."""
    _ordinary_priority()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Proc:
    def __init__(self, config: dict, tag: str, stdin: bool, pty: dict | None = None) -> None:
        self.config, self.tag = config, tag
        env = {**DEFAULT_ENV, **_env, **(config.get("envs") or {})}
        cmd = config.get("cmd") or ""
        if not cmd:
            raise RpcError("invalid_argument", "process.cmd is empty")
        cwd = config.get("cwd") or HOME
        if not os.path.isdir(cwd):
            raise RpcError("invalid_argument", f"cwd '{cwd}' does not exist")
        self.master: int | None = None
        argv = [cmd, *(config.get("args") or [])]
        try:
            if pty is not None:
                rows, cols = pty_size(pty)
                ensure_devpts()
                self.master, slave = os.openpty()
                try:
                    set_size(self.master, rows, cols)
                    self.p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                              start_new_session=True, preexec_fn=_controlling_tty)
                finally:
                    os.close(slave)
            else:
                self.p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True,
                                          preexec_fn=_ordinary_priority)
        except OSError as e:
            if self.master is not None:
                os.close(self.master)
            raise RpcError("invalid_argument", f"cannot start {cmd}: {e}") from None
        if self.master is None and not stdin:
            self.p.stdin.close()
        self.pid = self.p.pid
        # The starter's queue is subscribed before the pumps start: output read before it subscribed would
        # go to no one (a quick ``echo`` lost its line under load).
        self.first: queue.Queue = queue.Queue()
        self.subs: list = [self.first]
        self.end: dict | None = None
        self.cond = threading.Condition()
        if self.master is not None:
            self.open_pipes = 1
            threading.Thread(target=self._pump_pty, daemon=True).start()
        else:
            self.open_pipes = 2
            for name, pipe in (("stdout", self.p.stdout), ("stderr", self.p.stderr)):
                threading.Thread(target=self._pump, args=(name, pipe), daemon=True).start()

    def write(self, data: bytes, to_pty: bool) -> None:
        """Input for the process: its PTY's (``to_pty``) or its stdin's."""
        if to_pty != (self.master is not None):
            raise RpcError("invalid_argument", f"process {self.pid} {'has no PTY' if to_pty else 'runs on a PTY'}: "
                                               f"send it {'stdin' if to_pty else 'pty'} input")
        if self.master is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.master, view):]
        else:
            self.p.stdin.write(data)
            self.p.stdin.flush()

    def resize(self, rows: int, cols: int) -> None:
        if self.master is None:
            raise RpcError("failed_precondition", f"process {self.pid} has no PTY to resize")
        set_size(self.master, rows, cols)

    def subscribe(self) -> queue.Queue:
        q: queue.Queue = queue.Queue()
        with self.cond:
            if self.end is not None:
                q.put({"end": self.end})
            else:
                self.subs.append(q)
        return q

    def unsubscribe(self, q) -> None:
        with self.cond:
            if q in self.subs:
                self.subs.remove(q)

    def _send(self, event: dict) -> None:
        with self.cond:
            for q in self.subs:
                q.put(event)

    def _pump(self, name: str, pipe) -> None:
        while True:
            data = pipe.read1(32768)
            if not data:
                break
            self._send({"data": {name: base64.b64encode(data).decode()}})
        self._pipe_closed()

    def _pump_pty(self) -> None:
        while True:
            try:
                data = os.read(self.master, 32768)
            except OSError:  # EIO: every holder of the terminal's other side has closed it
                data = b""
            if not data:
                break
            self._send({"data": {"pty": base64.b64encode(data).decode()}})
        self._pipe_closed()

    def _pipe_closed(self) -> None:
        with self.cond:
            self.open_pipes -= 1
            last = self.open_pipes == 0
        if last:
            rc = self.p.wait()
            if self.master is not None:
                os.close(self.master)
            end = {"exitCode": rc if rc >= 0 else 128 - rc, "exited": True,
                   "status": f"exit status {rc}" if rc >= 0 else f"signal: {signal.Signals(-rc).name.lower()}"}
            with self.cond:
                self.end = end
                for q in self.subs:
                    q.put({"end": end})
                self.subs = []
            with _lock:
                _procs.pop(self.pid, None)

    def info(self) -> dict:
        return {"config": self.config, "pid": self.pid, **({"tag": self.tag} if self.tag else {})}


def _select(sel: dict | None) -> Proc:
    sel = sel or {}
    with _lock:
        if "pid" in sel:
            p = _procs.get(int(sel["pid"]))
        else:
            p = next((x for x in _procs.values() if sel.get("tag") and x.tag == sel.get("tag")), None)
    if p is None:
        raise RpcError("not_found", f"process with {next(iter(sel.items()), ('pid', '?'))[0]} "
                                    f"{next(iter(sel.values()), '?')} not found")
    return p


def proc_start(req: dict, out) -> None:
    p = Proc(req.get("process") or {}, req.get("tag") or "", bool(req.get("stdin")), req.get("pty"))
    with _lock:
        _procs[p.pid] = p
    q = p.first
    out({"event": {"start": {"pid": p.pid}}})
    _follow(p, q, out)


def proc_connect(req: dict, out) -> None:
    p = _select(req.get("process"))
    q = p.subscribe()
    out({"event": {"start": {"pid": p.pid}}})
    _follow(p, q, out)


def _follow(p: Proc, q, out) -> None:
    try:
        while True:
            try:
                ev = q.get(timeout=KEEPALIVE_S)
            except queue.Empty:
                out({"event": {"keepalive": {}}})
                continue
            out({"event": ev})
            if "end" in ev:
                return
    finally:
        p.unsubscribe(q)


def proc_list(req: dict) -> dict:
    with _lock:
        return {"processes": [p.info() for p in _procs.values()]}


def proc_send_input(req: dict) -> dict:
    p = _select(req.get("process"))
    given = req.get("input") or {}
    to_pty = "pty" in given
    data = given.get("pty") if to_pty else given.get("stdin")
    if data is None:
        raise RpcError("invalid_argument", "input.stdin or input.pty is required")
    try:
        p.write(base64.b64decode(data), to_pty)
    except (OSError, ValueError) as e:
        raise RpcError("failed_precondition", f"the input of process {p.pid} is closed: {e}") from None
    return {}


def proc_close_stdin(req: dict) -> dict:
    p = _select(req.get("process"))
    if p.master is None:
        try:
            p.p.stdin.close()
        except OSError:
            pass
    return {}


def proc_signal(req: dict) -> dict:
    p = _select(req.get("process"))
    sig = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM,
           9: signal.SIGKILL, 15: signal.SIGTERM}.get(req.get("signal"))
    if sig is None:
        raise RpcError("invalid_argument", "signal is SIGNAL_SIGTERM or SIGNAL_SIGKILL")
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    return {}


def proc_update(req: dict) -> dict:
    """Resize a process's PTY (the only thing Update changes)."""
    p = _select(req.get("process"))
    if req.get("pty") is None:
        raise RpcError("invalid_argument", "pty.size is required")
    p.resize(*pty_size(req["pty"]))
    return {}


# -- filesystem -----------------------------------------------------------------------------------
def _path(p: str | None) -> str:
    if not p:
        raise RpcError("invalid_argument", "path is required")
    return os.path.normpath(p if p.startswith("/") else os.path.join(HOME, p))


def entry(path: str) -> dict:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise RpcError("not_found", f"path '{path}' does not exist") from None
    kind = ("FILE_TYPE_DIRECTORY" if stat.S_ISDIR(st.st_mode) else
            "FILE_TYPE_SYMLINK" if stat.S_ISLNK(st.st_mode) else "FILE_TYPE_FILE")
    e = {"name": os.path.basename(path) or "/", "type": kind, "path": path, "size": str(st.st_size),
         "mode": stat.S_IMODE(st.st_mode), "permissions": stat.filemode(st.st_mode),
         "owner": "root" if st.st_uid == 0 else str(st.st_uid), "group": "root" if st.st_gid == 0 else str(st.st_gid),
         "modifiedTime": dt.datetime.fromtimestamp(st.st_mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    if stat.S_ISLNK(st.st_mode):
        e["symlinkTarget"] = os.readlink(path)
        e["isSymlink"] = True
        if os.path.isdir(path):
            e["type"] = "FILE_TYPE_DIRECTORY"
    return e


def fs_stat(req: dict) -> dict:
    return {"entry": entry(_path(req.get("path")))}


def fs_list(req: dict) -> dict:
    root = _path(req.get("path"))
    depth = int(req.get("depth") or 1)
    if not os.path.isdir(root):
        raise RpcError("not_found" if not os.path.exists(root) else "invalid_argument",
                       f"path '{root}' is not a directory")
    out = []

    def walk(d: str, level: int) -> None:
        for name in sorted(os.listdir(d)):
            full = os.path.join(d, name)
            out.append(entry(full))
            if level < depth and os.path.isdir(full) and not os.path.islink(full):
                walk(full, level + 1)

    walk(root, 1)
    return {"entries": out}


def fs_mkdir(req: dict) -> dict:
    path = _path(req.get("path"))
    if os.path.exists(path):
        raise RpcError("already_exists", f"path '{path}' already exists")
    try:
        os.makedirs(path)
    except OSError as e:
        raise RpcError("invalid_argument", f"cannot make '{path}': {e.strerror}") from None
    return {"entry": entry(path)}


def fs_move(req: dict) -> dict:
    src, dst = _path(req.get("source")), _path(req.get("destination"))
    if not os.path.lexists(src):
        raise RpcError("not_found", f"path '{src}' does not exist")
    os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
    shutil.move(src, dst)
    return {"entry": entry(dst)}


def fs_remove(req: dict) -> dict:
    path = _path(req.get("path"))
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    else:
        raise RpcError("not_found", f"path '{path}' does not exist")
    return {}


def _snapshot(root: str, recursive: bool) -> dict:
    seen = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            full = os.path.join(d, n)
            try:
                seen[full] = os.lstat(full).st_mtime_ns
            except OSError:
                pass
        if not recursive:
            break
    return seen


def _changes(root: str, recursive: bool, before: dict) -> tuple:
    now = _snapshot(root, recursive)
    events = [{"name": os.path.relpath(p, root), "type": "EVENT_TYPE_CREATE"} for p in now if p not in before]
    events += [{"name": os.path.relpath(p, root), "type": "EVENT_TYPE_WRITE"}
               for p in now if p in before and now[p] != before[p]]
    events += [{"name": os.path.relpath(p, root), "type": "EVENT_TYPE_REMOVE"} for p in before if p not in now]
    return now, events


def fs_watch(req: dict, out) -> None:
    """Watch a directory by polling (no inotify binding in the standard library)."""
    root = _path(req.get("path"))
    if not os.path.isdir(root):
        raise RpcError("not_found", f"path '{root}' is not a directory")
    recursive = bool(req.get("recursive"))
    state = _snapshot(root, recursive)
    out({"start": {}})
    quiet = 0.0
    while True:
        time.sleep(0.2)
        state, events = _changes(root, recursive, state)
        for ev in events:
            out({"filesystem": ev})
        quiet = 0.0 if events else quiet + 0.2
        if quiet >= KEEPALIVE_S:
            out({"keepalive": {}})
            quiet = 0.0


def fs_create_watcher(req: dict) -> dict:
    root = _path(req.get("path"))
    if not os.path.isdir(root):
        raise RpcError("not_found", f"path '{root}' is not a directory")
    wid = base64.urlsafe_b64encode(os.urandom(9)).decode()
    _watchers[wid] = [root, bool(req.get("recursive")), _snapshot(root, bool(req.get("recursive")))]
    return {"watcherId": wid}


def fs_watcher_events(req: dict) -> dict:
    w = _watchers.get(req.get("watcherId") or "")
    if w is None:
        raise RpcError("not_found", "watcher not found")
    w[2], events = _changes(w[0], w[1], w[2])
    return {"events": events}


def fs_remove_watcher(req: dict) -> dict:
    _watchers.pop(req.get("watcherId") or "", None)
    return {}


UNARY = {"/process.Process/List": proc_list, "/process.Process/SendInput": proc_send_input,
         "/process.Process/SendSignal": proc_signal, "/process.Process/CloseStdin": proc_close_stdin,
         "/process.Process/Update": proc_update,
         "/filesystem.Filesystem/Stat": fs_stat, "/filesystem.Filesystem/ListDir": fs_list,
         "/filesystem.Filesystem/MakeDir": fs_mkdir, "/filesystem.Filesystem/Move": fs_move,
         "/filesystem.Filesystem/Remove": fs_remove, "/filesystem.Filesystem/CreateWatcher": fs_create_watcher,
         "/filesystem.Filesystem/GetWatcherEvents": fs_watcher_events,
         "/filesystem.Filesystem/RemoveWatcher": fs_remove_watcher}
STREAMS = {"/process.Process/Start": proc_start, "/process.Process/Connect": proc_connect,
           "/filesystem.Filesystem/WatchDir": fs_watch}


# -- the egress forwarder ------------------------------------------------------------------------
def _pipe(src: socket.socket, dst: socket.socket) -> None:
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


def _forward(conn: socket.socket) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(CHANNEL_SOCK)
        up.sendall(b"egress\n")
    except OSError:
        conn.close()
        up.close()
        return
    t = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
    t.start()
    _pipe(conn, up)
    t.join()
    conn.close()
    up.close()


def start_forwarder() -> None:
    """127.0.0.1:PROXY_PORT: each connection, as it is, to the hub's egress proxy."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", PROXY_PORT))
    except OSError:
        return  # already serving
    srv.listen(64)

    def serve() -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=_forward, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


start_forwarder()


# -- HTTP over one channel stream -----------------------------------------------------------------
def read_request(st) -> tuple:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = st.read(65536)
        if not chunk:
            raise ValueError("the request ended inside its head")
        buf += chunk
        if len(buf) > HEAD_MAX + BODY_MAX:
            raise ValueError("request too large")
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length") or 0)
    if length > BODY_MAX:
        raise ValueError("body too large")
    while len(body) < length:
        chunk = st.read(65536)
        if not chunk:
            break
        body += chunk
    return method, target, headers, body[:length]


def respond(st, status: int, body: bytes = b"", ctype: str = "application/json", extra: dict | None = None) -> None:
    reason = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
              409: "Conflict", 500: "Internal Server Error", 501: "Not Implemented"}.get(status, "Status")
    hdrs = {"Content-Type": ctype, "Content-Length": str(len(body)), "Connection": "close", **(extra or {})}
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    st.write(head.encode() + body)


def envelope(flags: int, obj: dict) -> bytes:
    data = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def serve(st) -> None:
    """Answer the one HTTP request on stream ``st``, then close it."""
    try:
        method, target, headers, body = read_request(st)
    except (ValueError, UnicodeDecodeError) as e:
        respond(st, 400, json.dumps({"code": "invalid_argument", "message": str(e)}).encode())
        st.close()
        return
    url = urllib.parse.urlsplit(target)
    q = dict(urllib.parse.parse_qsl(url.query))
    try:
        if url.path in STREAMS and method == "POST":
            stream_rpc(st, STREAMS[url.path], headers, body)
        elif url.path in UNARY and method == "POST":
            try:
                req = json.loads(body or b"{}")
                answer = UNARY[url.path](req if isinstance(req, dict) else {})
                respond(st, 200, json.dumps(answer).encode())
            except RpcError as e:
                respond(st, RpcError.STATUS.get(e.code, 500), json.dumps({"code": e.code, "message": e.message}).encode())
        elif url.path == "/health":
            respond(st, 204, ctype="text/plain")
        elif url.path == "/init" and method == "POST":
            req = json.loads(body or b"{}")
            _env.update({str(k): str(v) for k, v in (req.get("envVars") or {}).items()})
            respond(st, 204, ctype="text/plain")
        elif url.path == "/envs" and method == "GET":
            respond(st, 200, json.dumps(_env).encode())
        elif url.path == "/files" and method == "GET":
            get_file(st, q)
        elif url.path == "/files" and method == "POST":
            put_files(st, q, headers, body)
        else:
            respond(st, 404, json.dumps({"code": "not_found", "message": f"no route {method} {url.path}"}).encode())
    except (OSError, ValueError) as e:
        try:
            respond(st, 500, json.dumps({"code": "internal", "message": str(e)}).encode())
        except Exception:
            pass
    finally:
        try:
            st.close()
        except Exception:
            pass


def stream_rpc(st, fn, headers: dict, body: bytes) -> None:
    if len(body) < 5 or body[0] & FLAG_COMPRESSED:
        respond(st, 400, json.dumps({"code": "invalid_argument", "message": "one uncompressed enveloped message"}).encode())
        return
    (n,) = struct.unpack(">I", body[1:5])
    req = json.loads(body[5:5 + n] or b"{}")
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nConnection: close\r\n\r\n"
    st.write(head.encode())
    lock = threading.Lock()

    def out(msg: dict) -> None:
        with lock:
            st.write(envelope(0, msg))

    try:
        fn(req, out)
        st.write(envelope(FLAG_END, {}))
    except RpcError as e:
        st.write(envelope(FLAG_END, {"error": {"code": e.code, "message": e.message}}))


def get_file(st, q: dict) -> None:
    try:
        path = _path(q.get("path"))
    except RpcError as e:
        respond(st, 400, json.dumps({"code": 400, "message": e.message}).encode())
        return
    if not os.path.exists(path):
        respond(st, 404, json.dumps({"code": 404, "message": f"path '{path}' does not exist"}).encode())
        return
    if os.path.isdir(path):
        respond(st, 400, json.dumps({"code": 400, "message": f"path '{path}' is a directory"}).encode())
        return
    with open(path, "rb") as f:
        data = f.read()
    respond(st, 200, data, "application/octet-stream")


def _multipart(ctype: str, body: bytes) -> list:
    boundary = None
    for part in ctype.split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k == "boundary":
            boundary = v.strip('"')
    if not boundary:
        raise ValueError("multipart without a boundary")
    files = []
    for part in body.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        disp = next((h for h in head.decode("utf-8", "replace").split("\r\n")
                     if h.lower().startswith("content-disposition")), "")
        name = None
        for kv in disp.split(";"):
            k, _, v = kv.strip().partition("=")
            if k == "filename":
                name = v.strip('"')
        files.append((name, data[:-2] if data.endswith(b"\r\n") else data))
    return files


def put_files(st, q: dict, headers: dict, body: bytes) -> None:
    ctype = headers.get("content-type", "")
    try:
        if ctype.startswith("multipart/form-data"):
            parts = _multipart(ctype, body)
            if q.get("path") and len(parts) == 1:
                parts = [(q["path"], parts[0][1])]
        else:
            parts = [(q.get("path"), body)]
        written = []
        for name, data in parts:
            path = _path(name)
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            written.append({"name": os.path.basename(path), "type": "file", "path": path})
    except (RpcError, ValueError, OSError) as e:
        msg = e.message if isinstance(e, RpcError) else str(e)
        respond(st, 400, json.dumps({"code": 400, "message": msg}).encode())
        return
    respond(st, 200, json.dumps(written).encode())
