#!/usr/bin/python3
"""The guest side of the channel: PID 1 of every agent microVM.

It opens the channel port (virtio-serial port named ``apz.channel``, or a
vsock connection to the host where the kernel command line says
``apz.channel=vsock``), says HELLO, and serves streams:

Host -> guest services (the host opens a stream with {"service": ...}):

- ``exec``     {"argv": [...], "env": {...}, "cwd": "/workspace"}: runs a
  program; stream data in is its stdin, its stdout and stderr come back on
  the stream, the CLOSE carries {"exit": code}.
- ``echo``     sends back whatever it reads (used to test the channel).
- ``shutdown`` syncs the disks and powers the guest off.
- ``envd``     one HTTP request of the E2B SDK to a sandbox (``envd.py``).
- ``exec`` with {"park": NAME}: starts the program as ``exec`` does but holds it (its stdin open, its
  output kept in its pipe) and closes the stream with {"parked": NAME}; a warm template is saved with
  such a program started and waiting. A program whose ``env`` names ``contract.PARK_ENV`` is handed a
  pipe (its number is that variable's value) and the stream closes only once the program has closed
  it (``contract.unparked()``: imported and waiting), or with an error if it exits or is not ready
  within ``PARK_READY_S``. ``unpark`` {"name": NAME}: closes the held program's
  stdin (its signal to go on) and serves it on this stream as ``exec`` would have; once only
  (with {"end": true}: kills it instead).

Guest -> host: a program in the guest connects to the unix socket
``/run/apz/channel.sock`` and writes one line, the service it wants on the
host (``gateway\\n``); channeld opens a stream to the host with that service
and splices the two together. This is the guest's only way out.

Standard library only. ``channel.py`` and ``contract.py`` sit next to this file in the image.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import channel as chan  # noqa: E402
import contract  # noqa: E402 - the guest contract, beside this file

PORT_NAME = "apz.channel"
LOCAL_SOCK = contract.CHANNEL_SOCK
VSOCK_PORT = 1024
_children: set = set()
_children_lock = threading.Lock()


def log(msg: str) -> None:
    try:
        with open("/dev/kmsg", "w") as f:
            f.write(f"apz-channeld: {msg}\n")
    except OSError:
        print(f"apz-channeld: {msg}", file=sys.stderr, flush=True)


def cmdline() -> dict:
    try:
        words = open("/proc/cmdline").read().split()
    except OSError:
        return {}
    return dict(w.split("=", 1) for w in words if "=" in w)


# -- services -----------------------------------------------------------------
#: Programs channeld holds or serves by name (``park``, or ``hold`` on ``exec``): name -> Served.
_named: dict = {}
#: How long a parked program that takes the ready pipe (``contract.PARK_ENV``) has to close it, in seconds
#: (the host waits 30 s for the park's answer).
PARK_READY_S = 25.0
#: What a program that failed to park last wrote, sent back on the stream (bytes).
MAX_PARK_OUTPUT = 4096


class Served:
    """A program channeld started, and the host stream its output goes to (``st``). A named one (``park``,
    or ``hold`` on ``exec``) outlives the host that started it: when a restore brings a new host, it is
    held (``st`` None; what it writes waits) until that host's ``unpark`` gives it a stream again."""

    def __init__(self, proc: subprocess.Popen, name: str | None = None, st: chan.Stream | None = None):
        self.proc, self.name, self.st = proc, name, st
        self.cond = threading.Condition()
        if name is not None:
            _named[name] = self
        threading.Thread(target=self.run, daemon=True, name=f"serve-{proc.pid}").start()

    def held(self) -> bool:
        with self.cond:
            return self.st is None

    def hold(self) -> None:
        with self.cond:
            self.st = None

    def attach(self, st: chan.Stream) -> None:
        with self.cond:
            self.st = st
            self.cond.notify_all()

    def run(self) -> None:
        """Its output to the stream of the moment, then its exit code. A stream the host reset (and no
        restore gave it another) ends the program."""
        while True:
            data = self.proc.stdout.read1(chan.MAX_PAYLOAD)
            if not data or not self.send(data):
                break
        rc = self.proc.wait()
        with _children_lock:
            _children.discard(self.proc.pid)
        if self.name is not None and _named.get(self.name) is self:
            del _named[self.name]
        with self.cond:
            st = self.st
        if st is not None:
            try:
                st.close({"exit": rc})
            except chan.ChannelClosed:
                pass

    def send(self, data: bytes) -> bool:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.st is not None)   # held: until the next host takes it
                st = self.st
            try:
                st.write(data)
                return True
            except (chan.StreamReset, chan.ChannelClosed):
                with self.cond:
                    if self.st is not st:   # held by a restore meanwhile: this goes to the next stream
                        continue
                self.proc.kill()
                return False


#: Why a restore ended the old host's streams (the reset each one reads).
RESTORED = "the guest was restored: the host that opened this stream is gone"


def new_host(ch: chan.Channel) -> list:
    """A restore: the host that opened this channel's streams is gone. Every named program is held for
    the new host's ``unpark``, every stream of the old host ends here (a guest program connected to the
    hub sees its connection close, and connects again), and the names held are returned."""
    for served in list(_named.values()):
        served.hold()
    ch.drop_streams(RESTORED)
    return sorted(_named)


def ready_pipe(env: dict) -> tuple:
    """For a program parked with ``contract.PARK_ENV`` in its environment: a pipe whose write end it
    inherits (the variable now names it); (read end, write end), or (None, None) without it."""
    if contract.PARK_ENV not in env:
        return None, None
    r, w = os.pipe()
    env[contract.PARK_ENV] = str(w)
    return r, w


def wait_ready(r: int, proc: subprocess.Popen) -> bool:
    """Until the program closed its ready pipe (True), or exited, or PARK_READY_S passed (False)."""
    p = select.poll()
    p.register(r, select.POLLIN | select.POLLHUP)
    deadline = time.monotonic() + PARK_READY_S
    while True:   # bytes written on it are no signal: only its close is
        left = deadline - time.monotonic()
        if left <= 0 or not p.poll(left * 1000):
            return False
        if not os.read(r, 4096):
            return proc.poll() is None


def serve_exec(st: chan.Stream) -> None:
    meta = st.meta
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/workspace", "LANG": "C.UTF-8"}
    env.update(meta.get("env") or {})
    park, hold = meta.get("park"), meta.get("hold")
    name = park if park is not None else hold
    if name is not None and (not isinstance(name, str) or name in _named or (park is not None and hold is not None)):
        st.close({"exit": 127, "error": f"cannot {'park' if park is not None else 'hold'} {name!r}"})
        return
    ready_r, ready_w = ready_pipe(env) if park is not None else (None, None)
    try:
        proc = subprocess.Popen(meta["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, pass_fds=() if ready_w is None else (ready_w,),
                                cwd=meta.get("cwd") or "/workspace", preexec_fn=normal_priority)
    except (OSError, KeyError, TypeError) as e:
        st.write(f"exec failed: {e}\n".encode())
        st.close({"exit": 127, "error": str(e)})
        return
    finally:
        if ready_w is not None:
            os.close(ready_w)
    with _children_lock:
        _children.add(proc.pid)
    if park is not None:
        if ready_r is not None:
            try:
                ready = wait_ready(ready_r, proc)
            finally:
                os.close(ready_r)
            if not ready:
                proc.kill()
                out = proc.communicate()[0] or b""
                with _children_lock:
                    _children.discard(proc.pid)
                st.write(out[-MAX_PARK_OUTPUT:])
                st.close({"exit": 127, "error": f"{park} did not say it was waiting (exit {proc.returncode})"})
                return
        Served(proc, park)
        st.close({"parked": park})
        return
    threading.Thread(target=pump_in, args=(st, proc), daemon=True).start()
    Served(proc, hold, st)


def serve_unpark(st: chan.Stream) -> None:
    """The held program of that name, told to go on (its stdin closed) and served on this stream."""
    name = st.meta.get("name")
    served = _named.get(name) if isinstance(name, str) else None
    if served is None or not served.held() or served.proc.poll() is not None:
        st.close({"exit": 127, "error": f"nothing parked as {st.meta.get('name')!r}"})
        return
    if st.meta.get("end"):   # not wanted in this machine (a sandbox restored from an agent's template)
        served.proc.kill()
    else:
        try:
            served.proc.stdin.close()
        except OSError:
            pass
    served.attach(st)


def pump_in(st: chan.Stream, proc: subprocess.Popen) -> None:
    """The stream's data to the process's stdin, until the host closes it (or its stream ends)."""
    try:
        while True:
            data = st.read()
            if not data:
                break
            proc.stdin.write(data)
            proc.stdin.flush()
    except (OSError, chan.StreamReset, chan.ChannelClosed):
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def serve_echo(st: chan.Stream) -> None:
    try:
        while True:
            data = st.read()
            if not data:
                break
            st.write(data)
    finally:
        st.close()


def serve_shutdown(st: chan.Stream) -> None:
    st.close({"ok": True})
    time.sleep(0.05)
    power_off()


def power_off() -> None:
    log("powering off")
    os.sync()
    for mnt in ("/workspace",):
        subprocess.run(["/bin/umount", mnt], stderr=subprocess.DEVNULL)
    os.sync()
    import ctypes  # noqa: PLC0415 - only to power off: its import (libffi) was 0.2 s of a TCG boot

    libc = ctypes.CDLL(None, use_errno=True)
    libc.reboot(0x01234567)  # RB_AUTOBOOT: with -no-reboot, QEMU exits
    os._exit(0)


def serve_envd(st: chan.Stream) -> None:
    """One E2B SDK request from the node gateway (a sandbox VM's daemon, ``envd.py`` beside this file)."""
    import envd  # noqa: PLC0415 - loaded on a sandbox's first request; an agent's guest never loads it
    envd.serve(st)


SERVICES = {"exec": serve_exec, "echo": serve_echo, "shutdown": serve_shutdown, "envd": serve_envd,
            "unpark": serve_unpark}


def on_open(st: chan.Stream) -> None:
    fn = SERVICES.get(st.meta.get("service"))
    if fn is None:
        st.reset(f"no service {st.meta.get('service')!r}")
        return
    try:
        fn(st)
    except Exception as e:  # a broken stream must not take PID 1 down
        log(f"service {st.meta.get('service')} failed: {e!r}")
        try:
            st.reset(repr(e))
        except Exception:
            pass


# -- guest -> host ------------------------------------------------------------
class Outbound:
    """Unix socket in the guest; each connection becomes a stream to the host."""

    def __init__(self) -> None:
        self.channel = None
        os.makedirs(os.path.dirname(LOCAL_SOCK), exist_ok=True)
        try:
            os.unlink(LOCAL_SOCK)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(LOCAL_SOCK)
        os.chmod(LOCAL_SOCK, 0o666)
        self.sock.listen(64)
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        try:
            head = b""
            while not head.endswith(b"\n") and len(head) < 1024:
                b = conn.recv(1)
                if not b:
                    return
                head += b
            service = head.decode().strip()
            ch = self.channel
            if ch is None or ch.closed:
                conn.sendall(b"ERR no channel\n")
                return
            st = ch.open(service)
            splice(conn, st, restored=service == "harness")
        finally:
            conn.close()


def splice(conn: socket.socket, st: chan.Stream, restored: bool = False) -> None:
    """The guest program's connection and its stream to the host, both ways. ``restored``: a harness's, told
    ``contract.GUEST_RESTORED`` when a restore ends the stream (it connects again at once)."""
    def up():
        try:
            while True:
                data = conn.recv(chan.MAX_PAYLOAD)
                if not data:
                    break
                st.write(data)
        except (OSError, chan.StreamReset, chan.ChannelClosed):
            pass
        st.close()

    t = threading.Thread(target=up, daemon=True)
    t.start()
    try:
        while True:
            data = st.read()
            if not data:
                break
            conn.sendall(data)
    except chan.StreamReset as e:
        if restored and str(e) == RESTORED:
            try:
                conn.sendall(chan.dumps(contract.error(contract.GUEST_RESTORED, RESTORED)) + b"\n")
            except OSError:
                pass
    except (OSError, chan.ChannelClosed):
        pass
    try:
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    t.join()


# -- PID 1 chores -------------------------------------------------------------
def reaper() -> None:
    """Reap orphans re-parented to PID 1, leaving our own Popen children alone."""
    while True:
        time.sleep(0.5)
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is None:
                break
            with _children_lock:
                ours = info.si_pid in _children
            if ours:
                break
            try:
                os.waitpid(info.si_pid, os.WNOHANG)
            except ChildProcessError:
                pass


def find_port() -> str:
    base = "/sys/class/virtio-ports"
    for _ in range(200):
        try:
            for d in os.listdir(base):
                try:
                    if open(f"{base}/{d}/name").read().strip() == PORT_NAME:
                        return f"/dev/{d}"
                except OSError:
                    pass
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no virtio port named {PORT_NAME}")


RNDRESEEDCRNG = 0x5207     # _IO('R', 0x07): reseed the kernel's random generator from its pool
#: /dev/urandom, opened for writing once at start (main): a restore's refresh then walks no path and
#: opens no file, kernel code a restored guest would run untranslated (TCG's cache starts empty).
_urandom: list = []


def open_urandom() -> None:
    try:
        _urandom.append(os.open("/dev/urandom", os.O_WRONLY | os.O_CLOEXEC))
    except OSError as e:
        log(f"/dev/urandom not opened: {e}")


def refresh(hello: dict) -> bool:
    """A host that restored this guest from a snapshot sends its wall clock and
    fresh entropy in its HELLO: set the clock, mix the bytes into the pool.
    Every line here runs from code TCG has not translated yet (a restored guest's code cache is empty),
    so it takes the shortest ways: ``time.clock_settime_ns`` (no ctypes, no libffi) and plain fds."""
    done = False
    if isinstance(hello.get("time"), (int, float)):
        try:
            time.clock_settime_ns(time.CLOCK_REALTIME, int(float(hello["time"]) * 1e9))
            done = True
        except (OSError, ValueError, OverflowError) as e:
            log(f"clock_settime failed: {e}")
    if isinstance(hello.get("entropy"), str):
        try:
            fd = _urandom[0] if _urandom else os.open("/dev/urandom", os.O_WRONLY)
            try:
                os.write(fd, bytes.fromhex(hello["entropy"]))      # mixed into the pool
                # A write only mixes the bytes into the input pool; the generator /dev/urandom reads
                # from is the copy that was saved until its next reseed (up to a minute): reseed it
                # now, so two restored copies never hand out the same bytes (root, PID 1).
                try:
                    fcntl.ioctl(fd, RNDRESEEDCRNG)
                except OSError as e:   # the host refuses a copy whose generator was not reseeded
                    log(f"random generator not reseeded: {e}")
                    return False
            finally:
                if not _urandom:
                    os.close(fd)
        except (OSError, ValueError) as e:
            log(f"entropy not mixed: {e}")
            done = False
    return done


def hello_reply(ch_ref: list):
    def on_hello(hello: dict) -> None:
        if hello.get("role") == "host" and not hello.get("reply"):
            reply = {"version": chan.VERSION, "role": "guest", "reply": True}
            ch = ch_ref[0]
            if "time" in hello or "entropy" in hello:   # a restore: a new host
                reply["refreshed"] = refresh(hello)
                if ch is not None:
                    reply["held"] = new_host(ch)
            if ch is not None and not ch.closed:
                try:
                    ch._send_locked(chan.HELLO, 0, chan.dumps(reply))
                except chan.ChannelClosed:
                    pass
    return on_hello


def serve_serial(out: Outbound) -> None:
    path = find_port()
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # (a channel's threads wait in poll, woken by its close)
    log(f"channel on {path}")
    while True:
        # Wait for the host end to be connected (POLLHUP while it is not).
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLOUT)
        while any(ev & select.POLLHUP for _, ev in p.poll(1000)):
            time.sleep(0.05)
        ref = [None]
        ch = chan.Channel(fd, role="guest", on_open=on_open, on_hello=hello_reply(ref))
        ref[0] = ch
        out.channel = ch
        ch.start()
        while not ch.closed:
            time.sleep(0.2)
        ch.close()  # its threads done with the port before the next channel takes it
        log("host disconnected; waiting")


def serve_vsock(out: Outbound) -> None:
    while True:
        try:
            s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
            s.connect((2, VSOCK_PORT))
        except OSError:
            time.sleep(0.2)
            continue
        ref = [None]
        ch = chan.Channel.over_socket(s, role="guest", on_open=on_open, on_hello=hello_reply(ref))
        ref[0] = ch
        out.channel = ch
        ch.start()
        while not ch.closed:
            time.sleep(0.2)
        ch.close()


#: channeld's scheduling priority (nice): ahead of the guest's own programs, so that a restored guest
#: answers the host's refresh before its resumed work runs (a busy guest's wake took 70 to 110 ms at nice 0,
#: bench/snapshots.py), and the hub's controls are never starved by a busy agent. What it starts runs at 0.
NICE = -10


def normal_priority() -> None:
    """In a program channeld starts, before it execs: the ordinary priority (nice 0), not channeld's."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)


def main() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)    # before any thread: each thread takes it on
    except OSError as e:
        log(f"priority not raised: {e}")
    if os.getpid() == 1:
        threading.Thread(target=reaper, daemon=True).start()
    open_urandom()
    out = Outbound()
    kind = cmdline().get("apz.channel", "serial")
    try:
        (serve_vsock if kind == "vsock" else serve_serial)(out)
    except Exception as e:
        log(f"fatal: {e!r}")
        if os.getpid() == 1:
            power_off()
        raise


if __name__ == "__main__":
    main()
