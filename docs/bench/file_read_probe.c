// A probe for docs/bench/notes.md ("Files: sequential 1 MiB reads"): reads a file that is in
// the page cache twice over in 1 MiB reads and prints wall time and process CPU per read.
//   mode 0: one thread, blocking pread          mode 2: four threads, blocking pread (a pool)
//   mode 1: one thread, io_uring, 8 reads in flight (flags: sqe flags, 16 = IOSQE_ASYNC)
// Build: gcc -O2 -o file_read_probe file_read_probe.c -luring -lpthread
// Run:   ./file_read_probe FILE MODE [FLAGS]   (FILE: 256 MiB, read once beforehand)
#define _GNU_SOURCE
#include <liburing.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdatomic.h>
#define BS (1<<20)
#define FS (256ull<<20)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static double cpu(){struct rusage u;getrusage(RUSAGE_SELF,&u);return u.ru_utime.tv_sec+u.ru_utime.tv_usec/1e6+u.ru_stime.tv_sec+u.ru_stime.tv_usec/1e6;}
static int gfd; static atomic_long gnext; static long greads;
static void* worker(void*a){char*b=aligned_alloc(4096,BS);memset(b,1,BS);for(long i=atomic_fetch_add(&gnext,1);i<greads;i=atomic_fetch_add(&gnext,1)){pread(gfd,b,BS,(i*BS)%FS);}return 0;}
int main(int argc,char**argv){
  const char*path=argv[1]; int mode=atoi(argv[2]); int flags=argc>3?atoi(argv[3]):0;
  int fd=open(path,O_RDONLY); if(mode==3){posix_fadvise(fd,0,0,POSIX_FADV_RANDOM);}
  int inflight=8; char*buf[8]; for(int i=0;i<8;i++){buf[i]=aligned_alloc(4096,BS);memset(buf[i],1,BS);}
  long reads=2*FS/BS; double w0=now(),c0=cpu(); unsigned long sum=0;
  if(mode==2){gfd=fd;greads=reads;pthread_t t[4];for(int i=0;i<4;i++)pthread_create(&t[i],0,worker,0);for(int i=0;i<4;i++)pthread_join(t[i],0);}
  else if(mode==0){ for(long i=0;i<reads;i++){ssize_t n=pread(fd,buf[0],BS,(i*BS)%FS); sum+=n;} }
  else { struct io_uring r; io_uring_queue_init(64,&r,0); long next=0,done=0; int shortc=0;
    for(int i=0;i<inflight;i++){struct io_uring_sqe*s=io_uring_get_sqe(&r);io_uring_prep_read(s,fd,buf[i],BS,(next*BS)%FS);s->flags|=flags;s->user_data=i;next++;}
    io_uring_submit(&r);
    while(done<reads){struct io_uring_cqe*c; io_uring_wait_cqe(&r,&c); int i=c->user_data; if(c->res!=BS)shortc++; sum+=c->res; io_uring_cqe_seen(&r,c); done++;
      if(next<reads){struct io_uring_sqe*s=io_uring_get_sqe(&r);io_uring_prep_read(s,fd,buf[i],BS,(next*BS)%FS);s->flags|=flags;s->user_data=i;next++;io_uring_submit(&r);}}
    if(shortc)printf("short %d\n",shortc);
  }
  double w=now()-w0,c=cpu()-c0; printf("mode %d flags %d: wall %.4f s cpu %.4f s, cpu/read %.1f us sum %lu\n",mode,flags,w,c,c/reads*1e6,sum);
}
