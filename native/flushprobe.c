/* pglab-flushprobe FILE SECONDS: write 8 kB and fdatasync it, over and over, for SECONDS; prints
 * "ops <n> seconds <s> cpu_s <user+sys>". pglab runs it with and without pglab_flush preloaded to measure the
 * emulated disk's flush rate and the emulation's own CPU per flush (pglab.nodes.emulation.probe). pg_test_fsync
 * gives the same rate for its fdatasync line, but runs 16 methods for at least a second each. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: pglab-flushprobe FILE SECONDS\n"); return 2; }
    double seconds = atof(argv[2]);
    char buf[8192];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) { perror(argv[1]); return 1; }
    long ops = 0;
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);  /* the loop's CPU only, not the program's start */
    double start = now(), t = start;
    while (t - start < seconds) {
        if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf || fdatasync(fd) != 0) { perror("flush"); return 1; }
        ops++;
        t = now();
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (ru.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6
               + (ru.ru_stime.tv_sec - ru0.ru_stime.tv_sec) + (ru.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    close(fd);
    unlink(argv[1]);
    printf("ops %ld seconds %.6f cpu_s %.6f\n", ops, t - start, cpu);
    return 0;
}
