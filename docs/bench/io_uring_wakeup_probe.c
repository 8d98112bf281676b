#include <liburing.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int a,b; volatile double sent_at;
void* writer(void* x){ for(int i=0;i<20;i++){ usleep(20000); sent_at=now(); write(b,"hello",5);} return 0; }
int main(int argc,char**argv){
  unsigned flags = atoi(argv[1])==0 ? (IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN|IORING_SETUP_TASKRUN_FLAG) : atoi(argv[1])==1 ? (IORING_SETUP_COOP_TASKRUN|IORING_SETUP_TASKRUN_FLAG) : 0;
  struct io_uring ring; struct io_uring_params p; memset(&p,0,sizeof p); p.flags=flags;
  printf("init %d\n", io_uring_queue_init_params(64,&ring,&p));
  int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in sa={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)}; bind(l,(void*)&sa,sizeof sa); listen(l,1);
  socklen_t len=sizeof sa; getsockname(l,(void*)&sa,&len); b=socket(AF_INET,SOCK_STREAM,0); connect(b,(void*)&sa,sizeof sa); a=accept4(l,0,0,SOCK_NONBLOCK);
  int efd=eventfd(0,EFD_NONBLOCK); io_uring_register_eventfd(&ring,efd);
  int ep=epoll_create1(0); struct epoll_event ev={.events=EPOLLIN}; epoll_ctl(ep,EPOLL_CTL_ADD,efd,&ev);
  pthread_t t; pthread_create(&t,0,writer,0);
  char buf[64]; double total=0;
  for(int i=0;i<20;i++){
    struct io_uring_sqe* s=io_uring_get_sqe(&ring); io_uring_prep_recv(s,a,buf,64,0);
    io_uring_submit_and_get_events(&ring);
    struct io_uring_cqe* c;
    for(;;){ struct epoll_event out; int n=epoll_wait(ep,&out,1,1000); uint64_t v; read(efd,&v,8);
      io_uring_get_events(&ring); if(io_uring_peek_cqe(&ring,&c)==0) break; }
    double d=now()-sent_at; total+=d; io_uring_cqe_seen(&ring,c);
  }
  printf("flags %x mean wake delay %.1f us\n", flags, total/20);
  pthread_join(t,0);
}
