/* pglab_flush: an LD_PRELOAD library that makes a process's durable flushes take as long as a slow disk's.
 *
 * Why: the synchronous_commit article's primary flushed its WAL to a SATA hard disk (about 120 flushes a
 * second); a virtual disk flushes 4,000-12,000 times a second, which sets aside every claim the disk explains.
 * With this library preloaded into a PostgreSQL server (pglab.nodes.emulation), each fsync, fdatasync and
 * each write to a file opened O_SYNC/O_DSYNC (wal_sync_method open_datasync/open_sync) does the real call and
 * returns when the emulated latency has passed since it began: one at a time, as on one disk, under an exclusive flock on the
 * control file that every process of the emulated disk shares (the backends, the WAL writer, the
 * checkpointer, and other nodes given the same file).
 *
 * PGLAB_FLUSH_CTL  the control file: its text is the latency in microseconds, read (pread, one syscall) at
 *                  every flush, so a run changes the latency between points without restarting the server;
 *                  0 or an empty/unreadable file: the real call alone, with no lock (this machine's disk).
 * Without PGLAB_FLUSH_CTL the library does nothing. Modelled on eatmydata (which removes fsync instead).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536
static unsigned char sync_fd[MAX_FD / 8];  /* fds opened with O_SYNC or O_DSYNC */
static int ctl_fd = -1;
static pid_t ctl_pid = 0;                  /* a forked child opens its own: flock belongs to an open file */
static long last_us = 0;

#define REAL(name, ret, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (!real_##name) real_##name = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static int ctl(void) {
    pid_t me = getpid();
    if (ctl_pid != me) {
        const char *path = getenv("PGLAB_FLUSH_CTL");
        ctl_pid = me;  /* the inherited descriptor is left open: closing it would not release anything */
        ctl_fd = path && *path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  /* wake at the deadline, not up to 50 us after it */
    }
    return ctl_fd;
}

static long latency_us(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {  /* a file being rewritten can read empty for an instant: keep the last value then */
        buf[n] = 0;
        last_us = strtol(buf, NULL, 10);
    }
    return last_us;
}

/* Hold the disk, run the real flush, and return no sooner than the emulated latency after it began (an absolute
 * deadline: the real call's own time is part of the latency, as on a disk); then release the disk. */
#define FLUSHED(call) do { \
        int c_ = ctl(); \
        long us_ = c_ >= 0 ? latency_us(c_) : 0; \
        if (us_ <= 0) return (call); \
        while (flock(c_, LOCK_EX) != 0 && errno == EINTR) {} \
        struct timespec d_; \
        clock_gettime(CLOCK_MONOTONIC, &d_); \
        __typeof__(call) r_ = (call); \
        int e_ = errno; \
        d_.tv_sec += us_ / 1000000; \
        d_.tv_nsec += (us_ % 1000000) * 1000; \
        if (d_.tv_nsec >= 1000000000) { d_.tv_sec++; d_.tv_nsec -= 1000000000; } \
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d_, NULL) == EINTR) {} \
        flock(c_, LOCK_UN); \
        errno = e_; \
        return r_; \
    } while (0)

static int is_sync(int fd) { return fd >= 0 && fd < MAX_FD && (sync_fd[fd / 8] >> (fd % 8)) & 1; }
static void mark(int fd, int flags) {
    if (fd < 0 || fd >= MAX_FD) return;
    if (flags & (O_SYNC | O_DSYNC)) sync_fd[fd / 8] |= 1 << (fd % 8);
    else sync_fd[fd / 8] &= ~(1 << (fd % 8));
}

int fsync(int fd) { REAL(fsync, int, int); FLUSHED(real_fsync(fd)); }
int fdatasync(int fd) { REAL(fdatasync, int, int); FLUSHED(real_fdatasync(fd)); }

ssize_t write(int fd, const void *b, size_t n) {
    REAL(write, ssize_t, int, const void *, size_t);
    if (!is_sync(fd)) return real_write(fd, b, n);
    FLUSHED(real_write(fd, b, n));
}
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) {
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t);
    if (!is_sync(fd)) return real_pwrite(fd, b, n, o);
    FLUSHED(real_pwrite(fd, b, n, o));
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) {
    REAL(pwrite64, ssize_t, int, const void *, size_t, off_t);
    if (!is_sync(fd)) return real_pwrite64(fd, b, n, o);
    FLUSHED(real_pwrite64(fd, b, n, o));
}
ssize_t writev(int fd, const struct iovec *v, int c) {
    REAL(writev, ssize_t, int, const struct iovec *, int);
    if (!is_sync(fd)) return real_writev(fd, v, c);
    FLUSHED(real_writev(fd, v, c));
}
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) {
    REAL(pwritev, ssize_t, int, const struct iovec *, int, off_t);
    if (!is_sync(fd)) return real_pwritev(fd, v, c, o);
    FLUSHED(real_pwritev(fd, v, c, o));
}
ssize_t pwritev64(int fd, const struct iovec *v, int c, off_t o) {
    REAL(pwritev64, ssize_t, int, const struct iovec *, int, off_t);
    if (!is_sync(fd)) return real_pwritev64(fd, v, c, o);
    FLUSHED(real_pwritev64(fd, v, c, o));
}

#define OPENER(name, ...) \
    int name(__VA_ARGS__, int flags, ...) { \
        mode_t mode = 0; \
        if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
OPENER(open, const char *p) REAL(open, int, const char *, int, mode_t); int fd = real_open(p, flags, mode); mark(fd, flags); return fd; }
OPENER(open64, const char *p) REAL(open64, int, const char *, int, mode_t); int fd = real_open64(p, flags, mode); mark(fd, flags); return fd; }
OPENER(openat, int d, const char *p) REAL(openat, int, int, const char *, int, mode_t); int fd = real_openat(d, p, flags, mode); mark(fd, flags); return fd; }
OPENER(openat64, int d, const char *p) REAL(openat64, int, int, const char *, int, mode_t); int fd = real_openat64(d, p, flags, mode); mark(fd, flags); return fd; }
/* _FORTIFY_SOURCE builds call these for open() without O_CREAT */
int __open_2(const char *p, int flags) { REAL(__open_2, int, const char *, int); int fd = real___open_2(p, flags); mark(fd, flags); return fd; }
int __open64_2(const char *p, int flags) { REAL(__open64_2, int, const char *, int); int fd = real___open64_2(p, flags); mark(fd, flags); return fd; }

int close(int fd) { REAL(close, int, int); mark(fd, 0); return real_close(fd); }
