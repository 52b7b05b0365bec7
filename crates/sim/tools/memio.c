// Cost per byte of rt-app's `mem` (memset of a 4 MiB buffer) and `iorun` (write(2) of 4 KiB
// chunks to /dev/null), median of repetitions.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
  size_t size=4u<<20; char *buf=malloc(size); memset(buf,1,size);
  enum{N=200}; double r[N];
  for(int w=0;w<20;w++) memset(buf,w,size);
  for(int i=0;i<N;i++){double t0=now(); memset(buf,i,size); __asm__ volatile(""::"r"(buf):"memory"); r[i]=(now()-t0)/size;}
  qsort(r,N,sizeof r[0],cmp); printf("mem: median %.4f ns/byte (min %.4f, p90 %.4f)\n",r[N/2],r[0],r[N*9/10]);
  int fd=open("/dev/null",O_WRONLY); size_t chunk=4096, total=64u<<20;
  double q[N/10];
  for(int i=0;i<N/10;i++){double t0=now(); for(size_t d=0; d<total; d+=chunk) if(write(fd,buf,chunk)<0) return 1; q[i]=(now()-t0)/total;}
  qsort(q,N/10,sizeof q[0],cmp); printf("io (4 KiB writes to /dev/null): median %.4f ns/byte (min %.4f, p90 %.4f)\n",q[N/20],q[0],q[N/10*9/10]);
  double z[N/10];
  for(int i=0;i<N/10;i++){double t0=now(); for(int k=0;k<16;k++) if(write(fd,buf,size)<0) return 1; z[i]=(now()-t0)/(16.0*size);}
  qsort(z,N/10,sizeof z[0],cmp); printf("io (4 MiB writes, rt-app's chunking): median %.6f ns/byte\n",z[N/20]);
  return 0;}
