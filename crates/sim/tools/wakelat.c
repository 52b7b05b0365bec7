// Wake-up latency of a SCHED_FIFO thread on CPU 1, from the cause of the wake-up until the thread
// runs: its timer's expiry (nanosleep of 2 ms), or another thread's pthread_cond_broadcast from
// CPU 0 after 1 ms of spinning; with CPU 1 idle, and with a SCHED_OTHER hog on CPU 1 that the
// woken thread preempts. Medians of 300 wake-ups. The simulator's --wakeup-latency is the busy
// figure, --idle-exit-latency the idle one minus the busy one (tests/rtapp/machine_profile.py measures
// the timer's through rt-app; this checks that a wake-up by another thread costs about as much).
// gcc -O2 -o wakelat wakelat.c -lpthread && sudo ./wakelat
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
enum { N = 300 };
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { long long x = *(const long long *)a, y = *(const long long *)b; return x < y ? -1 : x > y; }
static void fifo(int on) { struct sched_param p = {.sched_priority = on ? 50 : 0}; if (sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &p)) { perror("sched_setscheduler"); exit(1); } }
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
static void report(const char *what, long long *v) { qsort(v, N, sizeof *v, cmp); printf("%-44s median %6.1f us  p10 %6.1f  p90 %6.1f\n", what, v[N / 2] / 1e3, v[N / 10] / 1e3, v[N * 9 / 10] / 1e3); }
static volatile int stop;
static void *hog(void *a) { (void)a; pin(1); while (!stop) ; return 0; }
static void timer(const char *what) {
  long long v[N]; pin(1); fifo(1);
  for (int i = 0; i < N; i++) { struct timespec ts = {0, 2000000}; long long t0 = now(); nanosleep(&ts, 0); v[i] = now() - t0 - 2000000; }
  fifo(0); report(what, v);
}
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile long long t_signal;
static volatile int generation, waiting;
static long long lat[N];
static void *waiter(void *a) {
  (void)a; pin(1); fifo(1);
  for (int i = 0; i < N; i++) {
    pthread_mutex_lock(&m); int g = generation; waiting = 1;
    while (g == generation) pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m); lat[i] = now() - t_signal;
  }
  return 0;
}
static void cond(const char *what) {
  pthread_t w; pin(0); pthread_create(&w, 0, waiter, 0);
  for (int i = 0; i < N; i++) {
    while (!waiting) { struct timespec z = {0, 300000}; nanosleep(&z, 0); }
    long long e = now() + 1000000; while (now() < e) ;
    pthread_mutex_lock(&m); waiting = 0; generation++; t_signal = now(); pthread_cond_broadcast(&c); pthread_mutex_unlock(&m);
  }
  pthread_join(w, 0); report(what, lat);
}
int main(void) {
  setvbuf(stdout, 0, _IOLBF, 0);
  alarm(120);
  timer("timer, CPU 1 idle");
  cond("pthread_cond_broadcast, CPU 1 idle");
  pthread_t h; pthread_create(&h, 0, hog, 0);
  timer("timer, CPU 1 busy (SCHED_OTHER hog)");
  cond("pthread_cond_broadcast, CPU 1 busy");
  stop = 1; pthread_join(h, 0);
  return 0;
}
