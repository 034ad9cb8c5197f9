/* /init of the tuned agentplaza guest: the steps of the stock image's init.sh, with no shell and no
 * process of its own but this one. It loads the virtio modules (finit_module), finds the disks by their
 * virtio serial, mounts the root read-only, tmpfs on /tmp /run /data, the workspace read-write (nosuid,
 * nodev) at /workspace, each data volume read-only at /data/<name>, brings up lo, empties the initramfs
 * and makes the root the root (as busybox's switch_root), then execs channeld as PID 1.
 *
 * Built by the image build (cc -static -Os); the kernel command line words it reads are the host's:
 * apz.channel=serial|vsock, apz.disks=N, apz.vols=name,name (names: [A-Za-z0-9_.-], not "." or "..").
 * Any failure says why on the console and in the kernel log, and the guest ends (QEMU runs with
 * -no-reboot, so the host sees the machine stop). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_VOLS 4          /* vmm.qemu: at most 4 data volumes (apz-vol0..3) */
#define DISK_WAIT_MS 5000   /* virtio_blk probes its disks inside the module load; this is for a late one */
#define DISK_POLL_MS 10     /* how often a late disk is looked for */
#define CMDLINE_MAX 4096

static const char *const MODS_HEAD[] = {"virtio_ring", "virtio", "virtio_mmio", 0};
static const char *const MODS_VSOCK[] = {"vsock", "vmw_vsock_virtio_transport_common",
                                         "vmw_vsock_virtio_transport", 0};
/* the channel's virtio-serial device is on PCI (vmm.image.build.CHANNEL_BUS) */
static const char *const MODS_SERIAL[] = {"virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", 0};
static const char *const MODS_TAIL[] = {"virtio_console", "virtio_blk", "virtio_balloon", 0};

static const char CHANNELD[] =
    "import sys; sys.path.insert(0, '/opt/apz'); import channeld; channeld.main()";

/* a line on the console, and in the kernel log too when `log` */
static void say(int log, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    line[n++] = '\n';
    int k = log ? open("/dev/kmsg", O_WRONLY | O_CLOEXEC) : -1;
    if (k >= 0) { (void)!write(k, line, n); close(k); }
    (void)!write(1, line, n);
}

static void fail(const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    say(1, "apz-init: %s", why);
    sleep(1);
    reboot(RB_AUTOBOOT);      /* -no-reboot: QEMU exits */
    reboot(RB_POWER_OFF);
    _exit(1);
}

static void must_mount(const char *src, const char *dst, const char *type, unsigned long flags,
                       const char *data) {
    if (mount(src, dst, type, flags, data) != 0)
        fail("mount %s on %s: %s", src, dst, strerror(errno));
}

static void load_modules(const char *const *names) {
    char path[128];
    for (; *names; names++) {
        snprintf(path, sizeof path, "/lib/modules/%s.ko", *names);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || syscall(SYS_finit_module, fd, "", 0) != 0)
            fail("insmod %s: %s", *names, strerror(errno));
        close(fd);
    }
}

static int count_disks(void) {
    DIR *d = opendir("/sys/block");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "vd", 2) == 0) n++;
    closedir(d);
    return n;
}

static void wait_for_disks(int want) {
    struct timespec tick = {0, DISK_POLL_MS * 1000 * 1000};
    for (int waited = 0; count_disks() < want; waited += DISK_POLL_MS) {
        if (waited >= DISK_WAIT_MS) fail("only %d of %d disks", count_disks(), want);
        nanosleep(&tick, 0);
    }
}

/* /dev/vdX of the disk whose virtio serial is `serial`, or 0 */
static const char *dev_for(const char *serial, char *out, size_t len) {
    DIR *d = opendir("/sys/block");
    if (!d) return 0;
    const char *found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (strncmp(e->d_name, "vd", 2) != 0) continue;
        char path[300], got[64];
        snprintf(path, sizeof path, "/sys/block/%s/serial", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, got, sizeof got - 1);
        close(fd);
        if (n <= 0) continue;
        got[n] = 0;
        got[strcspn(got, "\n")] = 0;
        if (strcmp(got, serial) == 0) {
            snprintf(out, len, "/dev/%s", e->d_name);
            found = out;
        }
    }
    closedir(d);
    return found;
}

static int valid_volume_name(const char *s) {
    if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strlen(s) > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

static void lo_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) fail("lo: %s", strerror(errno));
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) fail("lo up: %s", strerror(errno));
    close(s);
}

/* Empty the initramfs (what switch_root does, so its pages go back to the guest): everything on the
 * root's own device, nothing below a mount point of another. */
static void empty_dir(int dirfd, dev_t rootdev) {
    DIR *d = fdopendir(dirfd);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != rootdev) continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (sub >= 0) empty_dir(sub, rootdev);
            unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
        } else {
            unlinkat(dirfd, e->d_name, 0);
        }
    }
    closedir(d);
}

int main(void) {
    must_mount("proc", "/proc", "proc", 0, 0);
    must_mount("sysfs", "/sys", "sysfs", 0, 0);
    must_mount("devtmpfs", "/dev", "devtmpfs", 0, 0);

    char cmdline[CMDLINE_MAX] = "";
    int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, cmdline, sizeof cmdline - 1) : -1;
    if (fd >= 0) close(fd);
    if (n < 0) fail("read /proc/cmdline: %s", strerror(errno));
    cmdline[n] = 0;
    const char *channel = "serial";
    char *vols = 0;
    int disks = 1;
    for (char *save = 0, *w = strtok_r(cmdline, " \n", &save); w; w = strtok_r(0, " \n", &save)) {
        if (strncmp(w, "apz.channel=", 12) == 0) channel = w + 12;
        else if (strncmp(w, "apz.vols=", 9) == 0) vols = w + 9;
        else if (strncmp(w, "apz.disks=", 10) == 0) disks = atoi(w + 10);
    }

    load_modules(MODS_HEAD);
    if (strcmp(channel, "vsock") == 0) load_modules(MODS_VSOCK);
    if (strcmp(channel, "serial") == 0) load_modules(MODS_SERIAL);
    load_modules(MODS_TAIL);
    wait_for_disks(disks < 1 ? 1 : disks);

    char dev[300];
    if (!dev_for("apz-root", dev, sizeof dev)) fail("no root disk");
    must_mount(dev, "/newroot", "ext4", MS_RDONLY, 0);
    must_mount("tmpfs", "/newroot/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    must_mount("tmpfs", "/newroot/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755");
    must_mount("tmpfs", "/newroot/data", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755");
    if (dev_for("apz-ws", dev, sizeof dev))
        must_mount(dev, "/newroot/workspace", "ext4", MS_NOSUID | MS_NODEV, 0);
    int nvol = 0;
    for (char *save = 0, *name = vols ? strtok_r(vols, ",", &save) : 0; name;
         name = strtok_r(0, ",", &save), nvol++) {
        char serial[32], where[128];
        if (nvol >= MAX_VOLS) fail("more than %d volumes", MAX_VOLS);
        if (!valid_volume_name(name)) fail("bad volume name %s", name);
        snprintf(serial, sizeof serial, "apz-vol%d", nvol);
        if (!dev_for(serial, dev, sizeof dev)) fail("no disk for volume %s", name);
        snprintf(where, sizeof where, "/newroot/data/%s", name);
        if (mkdir(where, 0755) != 0 && errno != EEXIST) fail("mkdir %s: %s", where, strerror(errno));
        must_mount(dev, where, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, "noload");
    }
    mount(0, "/newroot/data", 0, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=555");
    lo_up();
    must_mount("/dev", "/newroot/dev", 0, MS_MOVE, 0);
    must_mount("/proc", "/newroot/proc", 0, MS_MOVE, 0);
    must_mount("/sys", "/newroot/sys", 0, MS_MOVE, 0);

    /* switch_root: empty the initramfs, make /newroot the root */
    struct stat rootst;
    int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0 || fstat(rootfd, &rootst) != 0) fail("open /: %s", strerror(errno));
    if (chdir("/newroot") != 0) fail("chdir /newroot: %s", strerror(errno));
    empty_dir(rootfd, rootst.st_dev);
    must_mount(".", "/", 0, MS_MOVE, 0);
    if (chroot(".") != 0 || chdir("/") != 0) fail("chroot: %s", strerror(errno));

    /* One line on the console (the kernel itself is quiet at loglevel=1): the owner's `events --all` and
     * the node log show that this guest came up, and when. */
    say(0, "apz-init: root and workspace mounted; starting the channel");
    /* -S: channeld needs only the standard library (no site, no .pth scan); its code comes compiled. */
    char *const argv[] = {"/usr/bin/python3", "-S", "-u", "-B", "-c", (char *)CHANNELD, 0};
    setenv("PATH", "/bin", 1);   /* channeld gives what it starts a PATH of its own */
    execv(argv[0], argv);
    fail("exec %s: %s", argv[0], strerror(errno));
    return 1;
}
