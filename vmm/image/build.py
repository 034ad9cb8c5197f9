"""Build the agent guest image: kernel, initramfs, ext4 root.

- Kernel: the pinned Debian cloud kernel package, fetched with
  ``apt-get download``, unpacked with ``dpkg -x``; its sha256 is recorded
  (and checked against the pin when one is set). The bootable ``vmlinux`` is
  the LZ4 stream inside the bzImage.
- Initramfs: the virtio modules and ``/init``: for the tuned image a static C program (``init.c``,
  compiled here), for the stock one busybox-static and ``stock/init.sh``.
- Profiles: ``tuned`` (the default) does at build time what the stock guest did at each boot: the
  initramfs is an uncompressed cpio with busybox's links already made, the guest's Python files are
  compiled once, the kernel command line (``Image.cmdline``) is trimmed for a one-tenant guest, and the
  balloon driver is in (free page reporting). ``stock`` is the first image as it was (gzip initramfs,
  ``busybox --install`` at boot, ``vmm/image/stock/init.sh``), kept so the bench can compare the two.
- Root: ``debootstrap --variant=minbase --include=python3,git,ca-certificates,python3-pip`` plus the guest
  side of the channel (``/opt/apz/channeld.py`` and ``channel.py``), the agent
  harness (``/opt/apz/harness.py``, started by the node over ``exec``) and the guest contract
  both read (``/opt/apz/contract.py``), as an
  ext4 image made with ``mkfs.ext4 -d`` (no mount needed).

Images are content-addressed: the key is the sha256 over the three
artifacts' sha256s, so a rebuild gets a new key. A recipe index maps the
inputs (package pins, guest files, init script) to the last key built from
them, which is how "built on first need" finds a cached image.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BUILDER_VERSION = 1
KERNEL_PACKAGE = "linux-image-6.1.0-50-cloud-amd64"
KERNEL_VERSION = "6.1.176-1"
# sha256 of the .deb as fetched when this pin was made; checked when set.
KERNEL_DEB_SHA256 = os.environ.get(
    "APZ_KERNEL_DEB_SHA256", "efe19f605b6f54a8352e68d85a629abb2d30b72a085faef603a9152590baa791")
SUITE = "bookworm"
MIRROR = os.environ.get("APZ_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# git: agents clone and push to the plaza's git server; ca-certificates and pip: the web tools (vm.fetch
# and vm.download over https, vm.install with pip), all through the egress proxy.
INCLUDE = ("python3", "git", "ca-certificates", "python3-pip")
MODULES = ("virtio_ring", "virtio", "virtio_mmio", "vsock", "vmw_vsock_virtio_transport_common",
           "vmw_vsock_virtio_transport", "virtio_console", "virtio_blk")
#: The tuned guest's extra modules: the balloon, for free page reporting (idle guests give memory back), and
#: virtio over PCI for the channel's virtio-serial device (``CHANNEL_BUS``).
TUNED_MODULES = MODULES + ("virtio_balloon", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci")
#: Where the tuned guest's channel device sits: on PCI (``microvm,pcie=on``, ``virtio-serial-pci``). On
#: virtio-mmio, QEMU gives every queue 1,024 slots (``VIRTQUEUE_MAX_SIZE``: the transport has no other
#: size) and the guest's driver fills the port's and the control queue's receive rings with a 4 KiB buffer
#: each: 8 MiB of the guest's memory for the channel. On PCI the device's own sizes hold (128 and 32):
#: an idle guest held 9.6 MiB less, and its boot took no more CPU (docs/vmm.md). The stock image keeps
#: virtio-mmio (its recipe is the first image's, unchanged).
CHANNEL_BUS = "pci"
PROFILES = ("tuned", "stock")
DEFAULT_PROFILE = "tuned"
#: The tuned guest's kernel command line (beside the machine's own ``console= panic= apz.*``): one agent
#: owns the whole guest, so the guest kernel's defences between its own processes (PTI, retpolines,
#: zeroing each page it hands out) guard nothing and cost most under TCG; ``tsc=reliable`` skips the
#: clocksource watchdog, ``no_timer_check`` the IO-APIC timer probe, ``cryptomgr.notests`` the
#: self-tests, ``8250.nr_uarts=1`` the probing of ports that are not there.
#: ``initcall_blacklist``: boot steps measured (``initcall_debug``) to cost tens of ms under TCG and
#: serve nothing here: kprobe trace events, the KDF self-test, the X.509 certificates that check module
#: signatures (the tuned initramfs carries its modules unsigned: the host that builds the initramfs is
#: the one that would be trusted); tracefs's files (``tracer_init_tracefs``: a boot-time worker makes about
#: 7,000 inodes and dentries for the trace events, 8.5 MiB of the guest's memory that nothing here reads)
#: and the block tracer (``init_blk_tracer``: no ``blktrace`` here).
TUNED_CMDLINE = ("mitigations=off init_on_alloc=0 tsc=reliable no_timer_check cryptomgr.notests "
                 "8250.nr_uarts=1 random.trust_cpu=on loglevel=1 "
                 "initcall_blacklist=init_kprobe_trace,crypto_kdf108_init,load_system_certificate_list,"
                 "tracer_init_tracefs,init_blk_tracer")
#: The tuned guest's words under TCG only. ``clearcpuid=erms``: with ERMS the guest kernel's memset,
#: memcpy and copies to and from user memory are ``rep stosb``/``rep movsb``, and TCG runs a rep-string
#: instruction one iteration (one byte) per pass through its translated block; without it the kernel
#: takes its unrolled loops (``rep_good``'s eight bytes a pass for a page). A tuned cold boot to the
#: channel's HELLO took about 100 ms less (2.25 -> 2.14 s, alternated). Not under KVM, where the
#: hardware's fast strings are the fastest (the flag is the CPU's, so clearing it taints the guest
#: kernel 'S'; it is already 'E' for its unsigned modules).
TUNED_CMDLINE_TCG = "clearcpuid=erms"
#: The marker the kernel's module signing appends (after it: nothing; before it: the signature and its
#: 12-byte descriptor, whose last 4 bytes are the signature's length, big-endian).
MODULE_SIG_MAGIC = b"~Module signature appended~\n"
HERE = Path(__file__).resolve().parent
GUEST_FILES = {"channeld.py": HERE.parent / "guest" / "channeld.py",
               "channel.py": HERE.parent / "channel.py",
               "harness.py": HERE.parent / "guest" / "harness.py",
               "contract.py": HERE.parent / "guest" / "contract.py",
               "envd.py": HERE.parent / "guest" / "envd.py"}
#: The tuned guest's /init: one static program, no shell (each step the stock init.sh ran as a busybox
#: process, and the shell itself, ran from untranslated code under TCG: 70 ms of a boot).
INIT = HERE / "init.c"
INIT_STOCK = HERE / "stock" / "init.sh"
INIT_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror")
BUSYBOX = Path("/bin/busybox")
TOOLS = {"apt-get": "apt", "dpkg": "dpkg", "debootstrap": "debootstrap", "lz4": "lz4",
         "cpio": "cpio", "mkfs.ext4": "e2fsprogs", "cc": "gcc"}

Progress = Callable[[str, int, int], None]


class ImageError(RuntimeError):
    pass


def data_dir(explicit: os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("APZ_DATA_DIR"):
        return Path(os.environ["APZ_DATA_DIR"]) / "images"
    return Path.home() / ".local/share/agentplaza/images"


@dataclasses.dataclass(frozen=True)
class Image:
    key: str
    dir: Path
    kernel: Path
    initrd: Path
    rootfs: Path
    manifest: dict

    @classmethod
    def load(cls, d: Path) -> Image:
        m = json.loads((d / "manifest.json").read_text())
        initrd = d / ("initrd.cpio" if (d / "initrd.cpio").exists() else "initrd.cpio.gz")
        return cls(m["key"], d, d / "vmlinux", initrd, d / "rootfs.ext4", m)

    @property
    def profile(self) -> str:
        return self.manifest.get("profile", "stock")

    @property
    def cmdline(self) -> str:
        """The image's own kernel command line words (empty for the stock image)."""
        return self.manifest.get("cmdline", "")

    @property
    def cmdline_tcg(self) -> str:
        """The image's words for a guest under TCG only (empty for the stock image)."""
        return self.manifest.get("cmdline_tcg", "")

    @property
    def channel_bus(self) -> str:
        """Where the channel's virtio-serial device sits for this image's guest: "pci" or "mmio"."""
        return self.manifest.get("channel_bus", "mmio")


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def recipe(profile: str = DEFAULT_PROFILE) -> dict:
    if profile not in PROFILES:
        raise ValueError(f"no image profile {profile!r} (one of {', '.join(PROFILES)})")
    tuned = profile == "tuned"
    r = {
        "builder": BUILDER_VERSION,
        "kernel": {"package": KERNEL_PACKAGE, "version": KERNEL_VERSION},
        "root": {"suite": SUITE, "variant": "minbase", "include": list(INCLUDE)},
        "modules": list(TUNED_MODULES if tuned else MODULES),
        "init": hashlib.sha256((INIT if tuned else INIT_STOCK).read_bytes()).hexdigest(),
        "guest": {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in sorted(GUEST_FILES.items())},
        "busybox": None if tuned else (sha256_file(BUSYBOX) if BUSYBOX.exists() else None),
    }
    if tuned:   # the stock recipe stays byte for byte what it was, so its cached image is found
        r["profile"] = {"name": "tuned", "cmdline": TUNED_CMDLINE, "cmdline_tcg": TUNED_CMDLINE_TCG,
                        "initramfs": "cpio", "init": ["cc", *INIT_CFLAGS],
                        "pyc": sys.version_info[:2] == GUEST_PYTHON,
                        "modules_signed": False, "root_journal": False, "channel_bus": CHANNEL_BUS,
                        "login_profile": EUID_TEST}
    return r


#: The guest root's Python (bookworm): the build compiles the guest files when the host's is the same.
GUEST_PYTHON = (3, 11)


def recipe_hash(r: dict | None = None) -> str:
    return hashlib.sha256(json.dumps(r or recipe(), sort_keys=True).encode()).hexdigest()


def missing_tools() -> list:
    miss = [f"{t} (apt: {pkg})" for t, pkg in TOOLS.items() if shutil.which(t) is None]
    if not BUSYBOX.exists():
        miss.append("/bin/busybox (apt: busybox-static)")
    if shutil.which("cc") and not os.path.isabs(
            subprocess.run(["cc", "-print-file-name=libc.a"], capture_output=True, text=True).stdout.strip()):
        miss.append("libc.a, to link the tuned /init statically (apt: libc6-dev)")
    return miss


def cached(dd: os.PathLike | None = None, profile: str = DEFAULT_PROFILE) -> Image | None:
    d = data_dir(dd)
    idx = d / "recipes" / recipe_hash(recipe(profile))
    if idx.exists():
        img_dir = d / idx.read_text().strip()
        if (img_dir / "manifest.json").exists():
            return Image.load(img_dir)
    return None


def ensure_image(dd: os.PathLike | None = None, progress: Progress | None = None,
                 profile: str = DEFAULT_PROFILE) -> Image:
    """The cached image for the current recipe, built first if needed."""
    img = cached(dd, profile)
    return img if img is not None else build_image(dd, progress, profile=profile)


def _run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        raise ImageError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n"
                         f"{r.stdout.decode(errors='replace')[-3000:]}")
    return r


def private_folders(d: Path) -> None:
    """Make ``d`` and every folder above it that is missing, each 0700 (whatever the umask), and leave the ones
    there as they are. The default cache is in the plaza's data folder (``~/.local/share/agentplaza/images``),
    which apid refuses to start with when other users may read it: on a fresh machine the image is built
    before apid's first start, so this build makes that folder, and must make it private."""
    missing = []
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another build (or apid): left as it is
            continue
        os.chmod(folder, 0o700)  # (mkdir's mode passes through the umask, which could take the owner's bits too)


def _lock(d: Path):
    import fcntl
    private_folders(d)
    f = open(d / ".build.lock", "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def build_image(dd: os.PathLike | None = None, progress: Progress | None = None,
                force: bool = False, profile: str = DEFAULT_PROFILE) -> Image:
    d = data_dir(dd)
    lock = _lock(d)
    try:
        if not force:
            img = cached(dd, profile)
            if img is not None:   # another process built it while we waited
                return img
        miss = missing_tools()
        if miss:
            raise ImageError("cannot build the guest image; missing: " + ", ".join(miss))
        return _build(d, progress or (lambda *a: None), force, profile)
    finally:
        lock.close()


STEPS = 6


def _build(d: Path, progress: Progress, force: bool, profile: str = DEFAULT_PROFILE) -> Image:
    r = recipe(profile)
    tuned = profile == "tuned"
    t0 = time.monotonic()
    (d / "downloads").mkdir(parents=True, exist_ok=True)
    (d / "base").mkdir(parents=True, exist_ok=True)
    (d / "recipes").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="apz-image-", dir=d) as tmp:
        tmp = Path(tmp)
        # 1. kernel package
        progress("kernel package", 1, STEPS)
        deb = d / "downloads" / f"{KERNEL_PACKAGE}_{KERNEL_VERSION}_amd64.deb"
        if not deb.exists():
            _run(["apt-get", "download", f"{KERNEL_PACKAGE}={KERNEL_VERSION}"], cwd=tmp)
            got = next(tmp.glob(f"{KERNEL_PACKAGE}_*.deb"))
            shutil.move(got, deb)
        deb_sha = sha256_file(deb)
        if KERNEL_DEB_SHA256 and deb_sha != KERNEL_DEB_SHA256:
            raise ImageError(f"{deb.name}: sha256 {deb_sha} != pinned {KERNEL_DEB_SHA256}")
        kx = tmp / "kernel"
        _run(["dpkg", "-x", str(deb), str(kx)])
        # 2. vmlinux from the bzImage's LZ4 stream
        progress("vmlinux", 2, STEPS)
        vmlinuz = next((kx / "boot").glob("vmlinuz-*"))
        kver = vmlinuz.name[len("vmlinuz-"):]
        out = tmp / "out"
        out.mkdir()
        blob = vmlinuz.read_bytes()
        off = blob.find(b"\x02\x21\x4c\x18")
        if off < 0:
            raise ImageError("no LZ4 stream in the bzImage")
        p = subprocess.run(["lz4", "-dc"], input=blob[off:], capture_output=True)
        if not p.stdout.startswith(b"\x7fELF"):
            raise ImageError(f"LZ4 stream did not give an ELF vmlinux: {p.stderr[-300:]!r}")
        (out / "vmlinux").write_bytes(p.stdout)
        # 3. initramfs
        progress("initramfs", 3, STEPS)
        ir = tmp / "initramfs"
        for sub in ("lib/modules", "proc", "sys", "dev", "newroot", *(() if tuned else ("bin",))):
            (ir / sub).mkdir(parents=True, exist_ok=True)
        if tuned:
            _run(["cc", *INIT_CFLAGS, "-o", str(ir / "init"), str(INIT)])
        else:
            shutil.copy2(BUSYBOX, ir / "bin/busybox")
            shutil.copy2(INIT_STOCK, ir / "init")
        os.chmod(ir / "init", 0o755)
        moddir = kx / "lib/modules" / kver
        for m in r["modules"]:
            found = list(moddir.rglob(f"{m}.ko"))
            if not found:
                raise ImageError(f"module {m}.ko not in {KERNEL_PACKAGE}")
            shutil.copy2(found[0], ir / "lib/modules" / f"{m}.ko")
            if tuned:   # no RSA check of each module at every boot
                unsigned_module(ir / "lib/modules" / f"{m}.ko")
        files = _run("find . -print0 | sort -z | cpio --null -o -H newc --quiet -R 0:0",
                     shell=True, cwd=ir).stdout
        if tuned:   # the guest kernel need not inflate it (QEMU copies it in whole)
            (out / "initrd.cpio").write_bytes(files)
        else:
            import gzip
            (out / "initrd.cpio.gz").write_bytes(gzip.compress(files, 6, mtime=0))
        initrd_name = "initrd.cpio" if tuned else "initrd.cpio.gz"
        # 4. debootstrap base (cached by its own recipe)
        progress("debootstrap (about a minute)", 4, STEPS)
        base_key = hashlib.sha256(json.dumps(r["root"], sort_keys=True).encode()).hexdigest()[:16]
        base_tar = d / "base" / f"{SUITE}-minbase-{base_key}.tar"
        if force or not base_tar.exists():
            bdir = tmp / "base"
            _run(["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE,
                  str(bdir), MIRROR])
            for junk in ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                         "usr/share/locale", "usr/share/info"):
                shutil.rmtree(bdir / junk, ignore_errors=True)
            _run(["tar", "-C", str(bdir), "--numeric-owner", "-cf", str(base_tar) + ".part", "."])
            os.replace(str(base_tar) + ".part", base_tar)
            shutil.rmtree(bdir)
        # 5. root: base + guest files
        progress("root filesystem", 5, STEPS)
        root = tmp / "root"
        root.mkdir()
        _run(["tar", "-C", str(root), "--numeric-owner", "-xf", str(base_tar)])
        (root / "opt/apz").mkdir(parents=True, exist_ok=True)
        for name, src in GUEST_FILES.items():
            shutil.copy2(src, root / "opt/apz" / name)
        os.chmod(root / "opt/apz/channeld.py", 0o755)
        if tuned and r["profile"]["pyc"]:   # compiled once here, not by every guest at every start
            import compileall
            import py_compile
            compileall.compile_dir(str(root / "opt/apz"), quiet=1, legacy=False,
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        for sub in ("workspace", "data", "run", "tmp"):
            (root / sub).mkdir(exist_ok=True)
        (root / "etc/hostname").write_text("agent\n")
        if tuned:
            login_shell_without_forks(root)
        size_mb = int(int(_run(["du", "-sm", str(root)]).stdout.split()[0]) * 1.3) + 64
        # The root is mounted read-only: the tuned one has no journal for the kernel to load at each mount.
        _run(["mkfs.ext4", "-q", "-F", "-L", "apz-root", *(["-O", "^has_journal"] if tuned else []),
              "-d", str(root), str(out / "rootfs.ext4"), f"{size_mb}M"])
        shutil.rmtree(root)
        # 6. content address
        progress("content hash", 6, STEPS)
        arts = {n: sha256_file(out / n) for n in ("vmlinux", initrd_name, "rootfs.ext4")}
        key = hashlib.sha256(json.dumps(arts, sort_keys=True).encode()).hexdigest()[:32]
        manifest = {"key": key, "recipe": r, "recipe_hash": recipe_hash(r), "artifacts": arts,
                    "profile": profile, "cmdline": TUNED_CMDLINE if tuned else "",
                    "cmdline_tcg": TUNED_CMDLINE_TCG if tuned else "",
                    "channel_bus": CHANNEL_BUS if tuned else "mmio",
                    "kernel": {"package": KERNEL_PACKAGE, "version": KERNEL_VERSION,
                               "deb_sha256": deb_sha, "release": kver},
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "build_seconds": round(time.monotonic() - t0, 1)}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        for f in out.iterdir():
            os.chmod(f, 0o644)
        final = d / key
        if final.exists():
            shutil.rmtree(final)
        os.replace(out, final)
        os.chmod(final, 0o755)
        (d / "recipes" / recipe_hash(r)).write_text(key + "\n")
    return Image.load(final)


#: What the tuned image's ``/etc/profile`` asks instead of running ``id -u``: bash knows the user as ``$EUID``.
EUID_TEST = '"${EUID:-$(id -u)}"'


def login_shell_without_forks(root: Path) -> None:
    """The tuned root's ``/etc/profile`` without its ``$(id -u)``, a fork and an exec in every login shell: every
    E2B command is one (``bash -l -c``), and under TCG the two cost tens of milliseconds. Bash has ``$EUID``; a
    shell without it (dash as ``sh -l``) still runs ``id -u``."""
    profile = root / "etc/profile"
    if profile.exists():
        profile.write_text(profile.read_text().replace('"$(id -u)"', EUID_TEST))


def unsigned_module(ko: Path) -> None:
    """Drop a kernel module's appended signature (the guest kernel then loads it without an RSA check;
    it enforces no signatures). A module without one is left as it is."""
    data = ko.read_bytes()
    if not data.endswith(MODULE_SIG_MAGIC):
        return
    end = len(data) - len(MODULE_SIG_MAGIC)
    sig_len = int.from_bytes(data[end - 4:end], "big")
    cut = end - 12 - sig_len
    if cut <= 0 or not data.startswith(b"\x7fELF"):
        raise ImageError(f"{ko.name}: unexpected module signature layout")
    ko.write_bytes(data[:cut])


def console_progress(stream=sys.stderr) -> Progress:
    start = time.monotonic()

    def show(step: str, i: int, n: int) -> None:
        bar = "#" * i + "." * (n - i)
        stream.write(f"\r[{bar}] {i}/{n} {step:<32} {time.monotonic() - start:6.1f}s\n")
        stream.flush()
    return show
