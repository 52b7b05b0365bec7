// The cost of moving a thread between task groups of the cgroup v1 cpu controller, as rt-app
// moves its threads (`cgroup_attach_task()`: fopen the group's `tasks`, fprintf the TID, fclose),
// for SimConfig's taskgroup_move_* defaults (docs/simulator.md, "Task groups").
//
// The thread moves itself alternately into a group and back to the root. Between two moves it
// does PASSES passes of RUN ms of busy loop then SLEEP ms of sleep (PASSES cycles through a
// comma-separated list), so the gap before each move and what the CPUs did in it vary as in
// rt-app's examples. Prints each move's duration with the gap since the previous move ended,
// then the median, p90 and max per gap class, and how busy the machine was meanwhile (this
// program included: RUN / (RUN + SLEEP) of one CPU), since a grace period's length depends on
// what the other CPUs do.
//
//   gcc -O2 -o /tmp/tgmove crates/sim/tools/tgmove.c
//   /tmp/tgmove MOVES RUN_MS SLEEP_MS PASSES [GROUP]     # root; GROUP defaults to /pacer-tgmove
//   /tmp/tgmove 40 20 80 2,1          # tutorial example 11's pattern
//   /tmp/tgmove 200 0 0 1             # back to back
//   /tmp/tgmove 40 0 100 1            # 100 ms asleep between moves
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *root = "/sys/fs/cgroup/cpu";

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int attach(const char *group) {
  char path[512];
  snprintf(path, sizeof path, "%s%s/tasks", root, strcmp(group, "/") ? group : "");
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  if (fprintf(f, "%d", gettid()) < 0) return -1;
  return fclose(f);
}

static void busy(double ms) {
  double end = now_ms() + ms;
  while (now_ms() < end) {
  }
}

static void nap(double ms) {
  struct timespec t = {(time_t)(ms / 1e3), (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
}

// Busy and total jiffies of all CPUs so far (/proc/stat).
static void cpu_jiffies(unsigned long long *busy, unsigned long long *total) {
  unsigned long long v[8] = {0};
  FILE *f = fopen("/proc/stat", "re");
  if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7]) != 8) {
    *busy = *total = 0;
  } else {
    *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    *total = *busy + v[3] + v[4];
  }
  if (f) fclose(f);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// The mean too: what a run loses to its moves is their sum, and slow moves take two or four
// ticks, so the median alone understates it.
static void summary(const char *label, double *v, int n) {
  if (n == 0) return;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  qsort(v, n, sizeof v[0], cmp);
  printf("%-28s n=%3d  median %8.3f ms  mean %8.3f ms  p90 %8.3f ms  max %8.3f ms  min %8.3f ms\n", label, n,
         v[n / 2], sum / n, v[n * 9 / 10], v[n - 1], v[0]);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s MOVES RUN_MS SLEEP_MS PASSES[,PASSES...] [GROUP]\n", argv[0]);
    return 2;
  }
  int moves = atoi(argv[1]);
  double run = atof(argv[2]), sleep_ms = atof(argv[3]);
  int passes[64], np = 0;
  for (char *s = strtok(argv[4], ","); s && np < 64; s = strtok(NULL, ",")) passes[np++] = atoi(s);
  const char *group = argc > 5 ? argv[5] : "/pacer-tgmove";
  char dir[512];
  snprintf(dir, sizeof dir, "%s%s", root, group);
  if (mkdir(dir, 0755) && errno != EEXIST) {
    perror(dir);
    return 1;
  }
  double *cost = calloc(moves, sizeof *cost), *gap = calloc(moves, sizeof *gap);
  double last_end = -1e9;
  unsigned long long b0, t0j, b1, t1j;
  cpu_jiffies(&b0, &t0j);
  for (int i = 0; i < moves; i++) {
    double t0 = now_ms();
    if (attach(i % 2 ? "/" : group)) {
      perror("attach");
      return 1;
    }
    double t1 = now_ms();
    cost[i] = t1 - t0;
    gap[i] = t0 - last_end;
    last_end = t1;
    for (int p = 0; p < passes[i % np]; p++) {
      busy(run);
      nap(sleep_ms);
    }
  }
  cpu_jiffies(&b1, &t1j);
  attach("/");
  rmdir(dir);
  double *a = calloc(moves, sizeof *a), *b = calloc(moves, sizeof *b), *all = calloc(moves, sizeof *all);
  int na = 0, nb = 0;
  for (int i = 0; i < moves; i++) {
    printf("move %3d  gap %9.3f ms  cost %8.3f ms\n", i, i ? gap[i] : -1.0, cost[i]);
    all[i] = cost[i];
    if (i == 0) continue;
    if (gap[i] < 1.0)
      a[na++] = cost[i];
    else
      b[nb++] = cost[i];
  }
  summary("all moves", all, moves);
  summary("gap < 1 ms", a, na);
  summary("gap >= 1 ms", b, nb);
  if (t1j > t0j) printf("machine busy %.0f %% of its CPUs meanwhile\n", 100.0 * (b1 - b0) / (t1j - t0j));
  return 0;
}
