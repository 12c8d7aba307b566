/*
 * What does a log's force cost on this file system, next to the figure
 * pg_test_fsync reports? pg_test_fsync rewrites one 8 kB block and syncs
 * it; a log appends, so each force writes blocks the last one did not
 * (and rewrites the tail block the last force left partly filled). This
 * program times the three patterns with fdatasync, into a file written
 * whole first (no block allocation, as a recycled or pre-zeroed log):
 *
 *   cc -O2 scripts/fsync-pattern.c -o /tmp/fsync-pattern
 *   for b in 1536 8192 10240; do /tmp/fsync-pattern /tmp/fsync.dat 3000 $b; done
 *
 * Arguments: a scratch file (deleted at the end), the forces per pattern,
 * the bytes per force.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES (1L << 20)
#define FORCE_BYTES_MAX (1L << 20)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void check(long r, const char *what) {
    if (r < 0) {
        perror(what);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE FORCES BYTES\n", argv[0]);
        return 2;
    }
    long forces = atol(argv[2]), bytes = atol(argv[3]);
    if (forces < 1 || forces > 1000000 || bytes < 1 || bytes > FORCE_BYTES_MAX) {
        fprintf(stderr, "FORCES must be 1 to 1000000, BYTES 1 to %ld\n", FORCE_BYTES_MAX);
        return 2;
    }
    char *buf = aligned_alloc(4096, CHUNK_BYTES + 4096);
    memset(buf, 'x', CHUNK_BYTES + 4096);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    check(fd, argv[1]);
    for (long off = 0; off < forces * (bytes + 4096) + CHUNK_BYTES; off += CHUNK_BYTES)
        check(pwrite(fd, buf, CHUNK_BYTES, off), "pwrite");
    check(fsync(fd), "fsync");

    double t0 = now_s();
    for (long i = 0; i < forces; i++) {
        check(pwrite(fd, buf, bytes, 0), "pwrite");
        check(fdatasync(fd), "fdatasync");
    }
    printf("%6ld B, one block rewritten (pg_test_fsync):       %6.1f us\n", bytes,
           (now_s() - t0) / forces * 1e6);

    t0 = now_s();
    for (long i = 0, off = 0; i < forces; i++, off += bytes) {
        check(pwrite(fd, buf, bytes, off), "pwrite");
        check(fdatasync(fd), "fdatasync");
    }
    printf("%6ld B, appended:                                  %6.1f us\n", bytes,
           (now_s() - t0) / forces * 1e6);

    t0 = now_s();
    for (long i = 0, off = 0; i < forces; i++, off += bytes) {
        long start = off & ~4095L; /* the tail block again, as a log's force */
        check(pwrite(fd, buf, off + bytes - start, start), "pwrite");
        check(fdatasync(fd), "fdatasync");
    }
    printf("%6ld B, appended from the tail's 4 kB block:       %6.1f us\n", bytes,
           (now_s() - t0) / forces * 1e6);
    close(fd);
    unlink(argv[1]);
    return 0;
}
