// Random 4 KiB reads of a cached 256 MiB file: io_uring with 64 in flight on one thread, or a
// pool of 4 threads making blocking preads. Prints wall time and CPU per read.
#define _GNU_SOURCE
#include <liburing.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#define BS 4096
#define FS (256ull << 20)
#define READS 65536
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double cpu(void) { struct rusage u; getrusage(RUSAGE_SELF, &u); return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6; }
static long off(long i) { return (long)(((unsigned long)i * 2654435761u) % (FS / BS)) * BS; }
static int fd; static atomic_long next;
static void* worker(void* a) { (void)a; char* b = aligned_alloc(4096, BS); memset(b, 1, BS);
  for (long i = atomic_fetch_add(&next, 1); i < READS; i = atomic_fetch_add(&next, 1)) pread(fd, b, BS, off(i));
  return 0; }
int main(int argc, char** argv) {
  fd = open(argv[1], O_RDONLY); int mode = atoi(argv[2]);
  char* buf[64]; for (int i = 0; i < 64; i++) { buf[i] = aligned_alloc(4096, BS); memset(buf[i], 1, BS); }
  struct io_uring r; io_uring_queue_init(256, &r, 0);
  double w0 = now(), c0 = cpu();
  if (mode == 0) { pthread_t t[4]; for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, worker, 0); for (int i = 0; i < 4; i++) pthread_join(t[i], 0); }
  else { long n = 0, done = 0;
    for (int i = 0; i < 64; i++) { struct io_uring_sqe* s = io_uring_get_sqe(&r); io_uring_prep_read(s, fd, buf[i], BS, off(n++)); s->user_data = i; }
    io_uring_submit(&r);
    while (done < READS) { struct io_uring_cqe* c; io_uring_wait_cqe(&r, &c); unsigned head; int seen = 0;
      io_uring_for_each_cqe(&r, head, c) { int i = c->user_data; seen++; done++;
        if (n < READS) { struct io_uring_sqe* s = io_uring_get_sqe(&r); io_uring_prep_read(s, fd, buf[i], BS, off(n++)); s->user_data = i; } }
      io_uring_cq_advance(&r, seen); io_uring_submit(&r); } }
  double w = now() - w0, c = cpu() - c0;
  printf("mode %d: wall %.4f s, cpu/read %.2f us\n", mode, w, c / READS * 1e6);
}
