// Cost of rt-app's `memrun` events, the simulator's defaults (crates/sim/src/memcost.rs): the
// loops of rt-app's memread()/memwrite() (volatile byte at a time, wrapping at the buffer's size)
// in ns per byte, and of memchase_run() (dependent loads along the chain
// init_memchase_resource() builds, bit-reversed or sequential) in ns per hop, for buffers from
// 4 KiB to 1 GiB (argument: the chase's stride, default 64). Each figure is the median of 5
// samples after a warm-up pass. `pacer sim --memrun-cost FILE` reads the output.
// gcc -O2 -o memrun crates/sim/tools/memrun.c && ./memrun > FILE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
enum{S=5};
static double median(double *r){qsort(r,S,sizeof r[0],cmp);return r[S/2];}
static void memread(unsigned long count,char *buf,unsigned long size){
  volatile char *p=buf; unsigned long passes=count/size, rem=count%size;
  for(unsigned long i=0;i<passes;i++) for(unsigned long j=0;j<size;j++) (void)p[j];
  for(unsigned long j=0;j<rem;j++) (void)p[j];}
static void memwrite(unsigned long count,char *buf,unsigned long size){
  volatile char *p=buf; unsigned long passes=count/size, rem=count%size;
  for(unsigned long i=0;i<passes;i++) for(unsigned long j=0;j<size;j++) p[j]=(char)j;
  for(unsigned long j=0;j<rem;j++) p[j]=(char)j;}
static unsigned bitrev(unsigned v,int n){unsigned r=0;for(int j=0;j<n;j++) if(v&(1u<<j)) r|=1u<<(n-j-1);return r;}
// The chain of init_memchase_resource() for `size` bytes (a power of two times `stride`).
static char *chain(size_t size,size_t stride,int random){
  int nbits=0; size_t npos=size/stride; while((1ul<<(nbits+1))<=npos) nbits++; npos=1ul<<nbits;
  char *b=malloc(npos*stride); if(!b) exit(1);
  for(size_t i=0;i<npos;i++){
    size_t s=random?(size_t)bitrev(i,nbits)*stride:i*stride, d=random?(size_t)bitrev((i+1)%npos,nbits)*stride:((i+1)%npos)*stride;
    *(char**)(b+s)=b+d;}
  return b;}
static char *chase(char *p,unsigned long count){char **q=(char**)p;for(unsigned long i=0;i<count;i++) q=(char**)*q;return (char*)q;}
int main(int argc,char**argv){
  size_t stride=argc>1?strtoul(argv[1],0,0):64;
  printf("# bytes  read_ns/byte  write_ns/byte\n");
  for(size_t size=4096;size<=(1ul<<30);size*=4){
    char *b=malloc(size); memset(b,0xAA,size); unsigned long count=size>(64ul<<20)?size:(64ul<<20); double r[S],w[S];
    memread(size,b,size); memwrite(size,b,size);
    for(int i=0;i<S;i++){double t0=now(); memread(count,b,size); r[i]=(now()-t0)/count;}
    for(int i=0;i<S;i++){double t0=now(); memwrite(count,b,size); w[i]=(now()-t0)/count;}
    printf("%zu %.4f %.4f\n",size,median(r),median(w)); free(b);}
  printf("# chase, stride %zu: footprint_bytes  random_ns/hop  sequential_ns/hop\n",stride);
  for(size_t size=4096;size<=(1ul<<30);size*=2){
    double t[2];
    for(int random=1;random>=0;random--){
      char *b=chain(size,stride,random), *p=b; size_t npos=size/stride; double r[S];
      unsigned long hops=npos>(4ul<<20)?npos:(4ul<<20);
      p=chase(p,npos);
      for(int i=0;i<S;i++){double t0=now(); p=chase(p,hops); __asm__ volatile(""::"r"(p):"memory"); r[i]=(now()-t0)/hops;}
      t[!random]=median(r); free(b);}
    printf("%zu %.3f %.3f\n",size,t[0],t[1]); fflush(stdout);}
  return 0;}
