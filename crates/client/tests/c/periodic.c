/*
 * A periodic program using only pacer.h and libpacer: it asks pacer for a SCHED_DEADLINE
 * reservation of its own thread, announces its load with workUnits hints and reports its jobs.
 * Used by the tests (crates/cli/tests/daemon.rs) and shown in docs/client.md.
 *
 *   periodic run PERIOD_MS LIGHT_JOBS    light jobs (1 unit), then a heavier load (4 units)
 *   periodic hold PERIOD_MS              reserve, say so, then keep running jobs until killed
 *   periodic quota PERIOD_MS BW          ask for a per-thread ceiling BW; print the refusal
 *   periodic boost DURATION_MS           boost a worker thread of its own; print its nice value
 *                                        during the boost and after it blocked
 *   periodic legacy PERIOD_MS SECONDS    an unmodified program: 0.8 ms jobs every period on an
 *                                        absolute grid, no pacer call (for `pacer exec --daemon`)
 *
 * Prints key=value lines; exits 0 when what it checks held.
 */
#define _GNU_SOURCE
#include <pacer.h>

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNIT_NS 400000LL /* CPU time of one work unit */

struct sched_attr_v1 {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static int64_t now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void work(int units) {
    int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + units * UNIT_NS;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    }
}

static struct sched_attr_v1 my_attr(void) {
    struct sched_attr_v1 a;
    memset(&a, 0, sizeof a);
    syscall(SYS_sched_getattr, 0, &a, sizeof a, 0);
    return a;
}

static void next_period(struct timespec *t, int64_t period_ns) {
    t->tv_nsec += period_ns;
    while (t->tv_nsec >= 1000000000L) {
        t->tv_nsec -= 1000000000L;
        t->tv_sec++;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL);
}

static int fail(const char *what) {
    printf("error=%s code=%d message=%s\n", what, pacer_last_error(), pacer_last_error_message());
    return 1;
}

static void jobs(pacer_session *s, int n, int units, int64_t period_ns, struct timespec *t) {
    for (int i = 0; i < n; i++) {
        pacer_session_job_begin(s);
        work(units);
        pacer_session_job_end(s);
        next_period(t, period_ns);
    }
}

static volatile pid_t worker_tid;
/* The worker waits for its start in one blocking read: a wait that woke it now and then (a
 * sleep loop) would block again after the boost and end it before `during` is read. */
static int worker_go[2];

/* Whether thread `tid` of this process is asleep (state S in /proc/self/task/TID/stat). */
static int asleep(pid_t tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the state follows the command name */
    return p && p[1] == ' ' && p[2] == 'S';
}

static void *worker(void *arg) {
    (void)arg;
    worker_tid = gettid();
    char go;
    if (read(worker_go[0], &go, 1) != 1)
        return NULL;
    work(5); /* 2 ms of CPU, then it blocks: the boost ends */
    usleep(50000);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: periodic run|hold|quota PERIOD_MS [N|BW]\n");
        return 2;
    }
    const char *mode = argv[1];
    int64_t period_ns = atoll(argv[2]) * 1000000LL;
    if (strcmp(mode, "legacy") == 0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t end = now_ns(CLOCK_MONOTONIC) + (argc > 3 ? atoll(argv[3]) : 5) * 1000000000LL;
        while (now_ns(CLOCK_MONOTONIC) < end) {
            work(2);
            next_period(&t, period_ns);
        }
        printf("policy=%u\n", my_attr().sched_policy);
        return 0;
    }
    pacer_client *c = pacer_connect(NULL);
    if (!c)
        return fail("connect");
    printf("in_process=%d\n", pacer_client_in_process(c));
    pid_t tid = gettid();
    if (strcmp(mode, "boost") == 0) {
        pthread_t th;
        if (pipe(worker_go) != 0)
            return fail("pipe");
        pthread_create(&th, NULL, worker, NULL);
        /* Boosted while it waits: blocking after the boost would end it at once. */
        while (!worker_tid || !asleep(worker_tid))
            usleep(1000);
        int before = getpriority(PRIO_PROCESS, worker_tid);
        int r = pacer_boost(c, worker_tid, period_ns);
        if (r < 0)
            return fail("boost");
        int during = getpriority(PRIO_PROCESS, worker_tid);
        if (write(worker_go[1], "g", 1) != 1)
            return fail("pipe write");
        usleep(30000);
        int after = getpriority(PRIO_PROCESS, worker_tid);
        pthread_join(th, NULL);
        printf("nice_before=%d nice_during=%d nice_after=%d\n", before, during, after);
        pacer_disconnect(c);
        return during < before && after == before ? 0 : 1;
    }
    if (strcmp(mode, "quota") == 0) {
        double bw = argc > 3 ? atof(argv[3]) : 0.5;
        pacer_session *s = pacer_session_create_ex(c, &tid, 1, period_ns, PACER_CONTROLLER_PROACTIVE, bw);
        if (s) {
            printf("granted=1\n");
            pacer_session_close(s);
            return 1;
        }
        printf("refused=%d quota=%d message=%s\n", pacer_last_error(),
               pacer_last_error() == -PACER_EQUOTA, pacer_last_error_message());
        pacer_disconnect(c);
        return pacer_last_error() == -PACER_EQUOTA ? 0 : 1;
    }
    pacer_session *s = pacer_session_create(c, &tid, 1, period_ns);
    if (!s)
        return fail("session");
    struct sched_attr_v1 a = my_attr();
    printf("policy=%u runtime_ns=%llu period_ns=%llu\n", a.sched_policy,
           (unsigned long long)a.sched_runtime, (unsigned long long)a.sched_period);
    fflush(stdout);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (strcmp(mode, "hold") == 0) {
        printf("reserved=%d\n", tid);
        fflush(stdout);
        for (;;)
            jobs(s, 100, 1, period_ns, &t);
    }
    int light = argc > 3 ? atoi(argv[3]) : 40;
    pacer_session_hint_work_units(s, 1);
    jobs(s, light, 1, period_ns, &t);
    int refused = pacer_session_sync(s);
    uint64_t light_rt = my_attr().sched_runtime;
    /* The heavier load is announced before its first job: the budget must rise now. */
    pacer_session_hint_work_units(s, 4);
    refused += pacer_session_sync(s);
    struct sched_attr_v1 h = my_attr();
    printf("light_runtime_ns=%llu heavy_runtime_ns=%llu refused=%d\n", (unsigned long long)light_rt,
           (unsigned long long)h.sched_runtime, refused);
    jobs(s, 10, 4, period_ns, &t);
    int closed = pacer_session_close(s);
    struct sched_attr_v1 after = my_attr();
    printf("closed=%d policy_after=%u\n", closed, after.sched_policy);
    pacer_disconnect(c);
    int ok = a.sched_policy == 6 && h.sched_runtime > light_rt && refused == 0 && closed == 0 &&
             after.sched_policy != 6;
    printf("ok=%d\n", ok);
    return ok ? 0 : 1;
}
