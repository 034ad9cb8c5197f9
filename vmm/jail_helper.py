"""The jail's helper: runs as root, builds the walls around one QEMU and execs it (see ``vmm.jail``).

``vmm.jail.spawn`` starts this file as its own script (``python -S``), moves it into the VM's cgroups and
then writes argv and the spec to its stdin (read to the end here; QEMU's stdin is /dev/null). It stays alive as the parent of
the VM's PID namespace for as long as QEMU runs, so it imports only what it needs (``os``, ``ctypes``,
``signal``, ``json``): every module it loaded stayed resident for the VM's life (14 MiB with the host
side's modules, about 10 MiB without, 4.7 MiB with these four: a bare interpreter's floor).

Once QEMU runs, the helper has only to wait for it, pass on the signals that stop it, and end with its
status; so it becomes ``WAITER``, a few lines of perl (``perl-base`` is Essential on Debian: always
there), which hold about 0.45 MiB of their own for the VM's life instead of 4.7 MiB. It is exec'd with
an empty environment (no ``PERL5OPT``, no ``PERL5LIB``), and the signals it handles are blocked across
the exec and unblocked once its handlers are set, so none is lost or kills it meanwhile. Where there is
no perl, or its exec fails, this process waits itself, as it did before.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 38, 24, 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SYS_pivot_root, SYS_capset, SYS_prctl, SYS_rt_sigprocmask = 155, 126, 157, 14
SIG_UNBLOCK = 1
#: Where the waiter's perl may be (none found: this process waits).
PERLS = ("/usr/bin/perl", "/bin/perl")
#: The waiter (see the module's docstring). Its arguments: QEMU's pid, 1 for a spare (``KEEP_SIGNAL``,
#: SIGUSR1, clears its parent-death signal: prctl through ``syscall``), and the mask of the signals the
#: helper blocked for the exec, unblocked here once the handlers are set. Its exit status is the
#: helper's: QEMU's own, or 128 + the signal that ended it. (``$! == 4``: EINTR; ``$!{EINTR}`` would load
#: perl's Errno module, a quarter of the waiter's memory.)
WAITER = (
    "my ($pid, $spare, $mask) = @ARGV;"
    "$SIG{$_} = sub { kill $_[0], $pid } for qw(TERM INT HUP);"
    f"$SIG{{USR1}} = sub {{ syscall({SYS_prctl}, {PR_SET_PDEATHSIG}, 0, 0, 0, 0) }} if $spare;"
    f"syscall({SYS_rt_sigprocmask}, {SIG_UNBLOCK}, pack('Q', $mask), 0, 8);"
    "1 while waitpid($pid, 0) == -1 && $! == 4;"
    "exit(($? & 127) ? 128 + ($? & 127) : ($? >> 8));"
)
SECBITS_LOCKED_ALL = 0x3f  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and their locks

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src, target, fstype, flags, data=None) -> None:
    _check(_libc.mount(src and str(src).encode(), str(target).encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {src} on {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _drop_all_caps() -> None:
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_ALL, 0, 0, 0), "securebits")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    hdr = Header(0x20080522, 0)
    data = (Data * 2)()
    _check(_libc.syscall(SYS_capset, ctypes.byref(hdr), ctypes.byref(data)), "capset")


def _build_root(spec: dict) -> None:
    root = spec["root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("jail", root, "tmpfs", MS_NOSUID, "mode=755,size=1m")

    def bind(host: str, inner: str, ro: bool, dev: bool = False) -> None:
        t = os.path.join(root, inner.lstrip("/"))
        os.makedirs(os.path.dirname(t), exist_ok=True)
        if os.path.isdir(host):
            os.makedirs(t, exist_ok=True)
        else:
            os.close(os.open(t, os.O_WRONLY | os.O_CREAT, 0o644))
        _mount(host, t, None, MS_BIND)
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if dev else MS_NODEV) | (MS_RDONLY if ro else 0)
        _mount(None, t, None, flags)

    for inner, host in spec["ro"].items():
        bind(host, inner, True)
    for inner, host in spec["rw"].items():
        bind(host, inner, False)
    for dev in spec["devices"]:
        if os.path.exists(dev):
            bind(dev, dev, False, dev=True)
    os.mkdir(os.path.join(root, "proc"))
    _mount("proc", os.path.join(root, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(os.path.join(root, "tmp"), 0o1777)
    os.chdir(root)
    os.mkdir(os.path.join(root, ".old"))
    _check(_libc.syscall(SYS_pivot_root, b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    # The root itself goes read-only: QEMU can write only its run folder and workspace.
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _open_fds(fds: dict) -> None:
    """Open each host file read-only here (root, before any wall) on the number QEMU is told
    (``-add-fd fd=N``), inherited through the forks and the exec; never writable."""
    for num, path in (fds or {}).items():
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.dup2(fd, int(num), inheritable=True)
        finally:
            os.close(fd)


def _helper(cfg: dict) -> int:
    spec, argv = cfg["spec"], cfg["argv"]
    if cfg.get("spare_of"):   # a QEMU started ahead (vmm.spare): it dies with its starter until taken
        signal.signal(signal.SIGUSR1, lambda _s, _f: _libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0))
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != cfg["spare_of"]:
            return 0
    _open_fds(spec.get("fds"))
    # PID/net/IPC/UTS namespaces here; the child makes its own mount namespace,
    # so its pivot_root does not move this helper's root.
    _unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_child_w), os.close(to_parent_r)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _unshare(CLONE_NEWNS)
            _build_root(spec)
            _libc.sethostname(b"vmm", 3)
            _unshare(CLONE_NEWUSER)
            os.write(to_parent_w, b"u")
            if os.read(to_child_r, 1) != b"m":
                os._exit(111)
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            # Changing the uid cleared the parent-death signal (prctl(2)): set it again, or a
            # killed helper leaves QEMU running on the VM's disks with nobody to stop it.
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _drop_all_caps()
            os.execv(argv[0], argv)
        except BaseException as e:  # report and die; never fall through to the parent's code
            try:
                os.write(2, f"vmm jail: {e}\n".encode())
            finally:
                os._exit(112)
    os.close(to_child_r), os.close(to_parent_w)
    if os.read(to_parent_r, 1) == b"u":
        uid = int(spec["uid"])
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1\n"), ("gid_map", f"0 {uid} 1\n")):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        os.write(to_child_w, b"m")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda sig, _f: os.kill(pid, sig))
    _become_waiter(pid, bool(cfg.get("spare_of")))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    return os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8


def _become_waiter(pid: int, spare: bool) -> None:
    """Exec perl's ``WAITER`` for QEMU ``pid`` (returns only where that cannot be done)."""
    perl = next((p for p in PERLS if os.access(p, os.X_OK)), None)
    if perl is None:
        return
    sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP} | ({signal.SIGUSR1} if spare else set())
    mask = sum(1 << (int(s) - 1) for s in sigs)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        os.execve(perl, [perl, "-e", WAITER, str(pid), "1" if spare else "0", str(mask)], {})
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _read_cfg() -> dict:
    """argv and the spec, from stdin to its end (the caller writes them once it has put this process in the
    VM's cgroups); then stdin is /dev/null, for QEMU."""
    chunks = []
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    if not chunks:   # a spare no VM took: its starter has gone (vmm.jail)
        sys.exit(0)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return json.loads(b"".join(chunks))


if __name__ == "__main__":
    rc = _helper(_read_cfg())
    sys.exit(rc if rc >= 0 else 128 - rc)
