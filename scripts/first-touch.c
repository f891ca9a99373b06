/*
 * What new anonymous memory costs on this machine, in one process: 512 MiB mapped, made ready
 * one of five ways, then written once in full (memset), with the CPU time of each step.
 *   1  MADV_POPULATE_WRITE (what the receive slabs get: src/memory/slab-arena.ts populateSlab)
 *   2  memset (first touch by a full write)   3  one byte per 4 KiB page
 *   4  MADV_POPULATE_WRITE, then one byte per page   5  one byte per page (plain faults)
 * On this project's VM, populate takes ~0.15 s/GB but the first write after it still costs
 * ~1.7 s/GB (no guest page fault: the host maps the page on first touch), against ~0.05 s/GB for
 * every later write (BENCHMARKS.md "t11-views").
 * Build and run: cc -O2 -o /tmp/first-touch scripts/first-touch.c && for m in 1 2 3 4 5; do /tmp/first-touch $m; done
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static double cpu(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
int main(int argc,char**argv){
  size_t n=512UL<<20; int mode=atoi(argv[1]);
  char*p=mmap(NULL,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);
  double c0=cpu(), t0=now();
  if(mode==1) madvise(p,n,MADV_POPULATE_WRITE);
  if(mode==2) memset(p,0,n);
  if(mode==3) for(size_t o=0;o<n;o+=4096) p[o]=0;
  if(mode==4) { madvise(p,n,MADV_POPULATE_WRITE); for(size_t o=0;o<n;o+=4096) p[o]=1; }
  if(mode==5) { for(size_t o=0;o<n;o+=4096) p[o]=1; }
  double prep=now()-t0, prepc=cpu()-c0;
  double c1=cpu(), t1=now(); memset(p,7,n); double w=now()-t1, wc=cpu()-c1;
  printf("mode %d: prepare %.0f ms (cpu %.0f) + first full write %.0f ms (cpu %.0f) = %.2f s/GB\n",mode,prep*1e3,prepc*1e3,w*1e3,wc*1e3,(prepc+wc)/(n/1e9));
}
