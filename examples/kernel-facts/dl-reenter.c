/*
 * dl-reenter.c - "demoted while throttled, then re-promoted" SCHED_DEADLINE test
 *
 * What it demonstrates
 * --------------------
 * A SCHED_DEADLINE thread that is *throttled* (runtime exhausted, waiting for
 * its replenishment timer) is switched to SCHED_OTHER by another thread and,
 * a few ms later, switched back to SCHED_DEADLINE with ordinary parameters
 * (2 ms / 10 ms / 10 ms).  On some kernels the thread then does not run at
 * all: it is runnable, but its CPU time stops advancing ("stuck").
 *
 * pacer can get a thread into that throttled state by "parking" a reservation
 * before demoting it: runtime 1024 ns, deadline = period = 1<<22 us
 * (4194304000 ns, the default sched_deadline_period_max_us).  The parked
 * thread overruns the 1024 ns budget by a few us before it is throttled, and
 * each replenishment adds only 1024 ns while moving the absolute deadline out
 * by 4.19 s, so it ends up throttled until a deadline seconds to minutes away.
 *
 * Seen on 6.18.44 (HZ=250, 2 CPUs, process pinned to CPU 0), two kinds of
 * "stuck", told apart in the output via /proc/self/task/TID/sched:
 *  A "throttled until the parked deadline": the park took effect (the thread
 *    got its 1024 ns, "parked=" > 0) before the demotion.  Demotion and
 *    re-promotion keep the far deadline and the throttle, so the thread
 *    sits there until that deadline (one was watched: resumed after 8.1 s,
 *    deadline had been +8.08 s).  Demote + 50 ms + re-promote does not help.
 *  B "deadline passed, no replenishment pending": the thread was demoted while
 *    still throttled from its 2 ms / 10 ms budget and the pending
 *    replenishment timer fired while it was SCHED_OTHER (that timer ignores a
 *    non-deadline task).  After re-promotion nothing replenishes it: stuck
 *    indefinitely (watched for 10 s).  A plain demote (SCHED_OTHER from the
 *    2 ms / 10 ms parameters) + 50 ms + re-promote made it run again; demoting
 *    the way pacer does (park first, variant 4) did not.
 * Note that with the controller on the same CPU, the controller only runs
 * while the deadline worker is throttled, so the park never hits the worker
 * mid-run; it takes effect at the worker's next replenishment.
 *
 * One trial (worker = a spinning thread; controller = main thread; the whole
 * process is pinned to CPU 0):
 *   1. worker -> SCHED_DEADLINE 2 ms / 10 ms / 10 ms, wait 50 ms
 *   2. park it (1024 ns / 4.194304 s / 4.194304 s), wait 5..20 ms (throttles)
 *   3. demote it to SCHED_OTHER, wait 1..7 ms
 *   4. re-promote it to SCHED_DEADLINE 2 ms / 10 ms / 10 ms
 *   5. watch its CPU time (pthread_getcpuclockid) for 300 ms;
 *      "stuck" = it advanced by less than 1 ms
 *   6. if stuck, try the recovery: SCHED_OTHER, wait 50 ms, re-promote,
 *      watch 100 ms ("recovered" = it got >= 1 ms)
 *   7. clean up: park, SCHED_OTHER, stop, join
 * The waits in 2 and 3 vary deterministically with the trial index because
 * the effect depends on timing.
 *
 * Build / run (as root, or with CAP_SYS_NICE):
 *   cc -O2 -o /tmp/dl-reenter examples/kernel-facts/dl-reenter.c -lpthread
 *   /tmp/dl-reenter [N_TRIALS=20] [VARIANT=0] [CPU=0]
 * CPU: the CPU to pin the whole process to (-1 = no pinning).  Admission
 * control only accepts a SCHED_DEADLINE thread whose affinity covers its
 * whole root domain, so pinning to one CPU needs that CPU to be a root
 * domain of its own (e.g. the other CPUs in an exclusive cpuset and load
 * balancing off in the root cpuset); otherwise sched_setattr fails (EPERM).
 * The program waits up to 10 s for that at the start and stops the run if
 * it changes later.  Run it while the cpuset layout is stable: if the
 * root domain is rebuilt while a worker is demoted but its
 * deadline bandwidth is not yet released (the recovery step), the late
 * release is subtracted from a root domain that never counted it, and
 * total_bw reads wrong (even negative) until the next rebuild.
 * VARIANT: 0 = park while the worker is spinning (default)
 *          1 = park while the worker is sleeping (worker spins 1 ms, sleeps 1 ms)
 *          2 = demote immediately after the park (no wait for the throttle)
 *          3 = re-promote with different parameters (3 ms / 20 ms / 20 ms)
 *          4 = like 0, but the recovery demotes the way pacer does (park,
 *              then SCHED_OTHER)
 *          5 = demote immediately after the park, re-promote 12..20 ms later
 *              (after the pending replenishment timer has fired)
 *
 * It must leave nothing behind: no thread under SCHED_DEADLINE and the
 * kernel's deadline bandwidth back at its baseline.  Check with
 *   mount -t debugfs none /sys/kernel/debug   # if not mounted yet
 *   grep -A3 'dl_rq\[0\]' /sys/kernel/debug/sched/debug   # .dl_bw->total_bw
 * before and after a run; the program prints the CPU 0 value itself when it
 * can read that file.  Cleanup always parks (bandwidth 1024/4194304000 rounds
 * to 0) before demoting, because a demotion from SCHED_DEADLINE gives the
 * bandwidth back only at the thread's "0-lag time", which for a throttled
 * thread with a far-away deadline can be minutes away (192 s seen).  Do not
 * kill it with SIGKILL while a worker is stuck: a throttled thread cannot run
 * to exit, so the process would hang until the far-away replenishment (kind
 * A) or for good (kind B).  SIGINT/SIGTERM are handled and clean up properly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif

struct sched_attr_v0 {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

#define MS 1000000ULL
#define PARK_RUNTIME 1024ULL
#define PARK_PERIOD (4194304ULL * 1000ULL) /* 1<<22 us */
#define WATCH_MS 300
#define REC_WATCH_MS 100
#define EPERM_WAIT_MS 10000
#define STUCK_NS (1 * MS)

static volatile sig_atomic_t interrupted;
static int variant;
static int quiet_eperm; /* do not report EPERM from sched_setattr */
static int cpu = 0; /* -1: do not pin */

struct worker {
	pthread_t th;
	clockid_t clk;
	volatile pid_t tid;
	volatile int stop;
};

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	if (clock_gettime(c, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int set_dl(pid_t tid, uint64_t runtime, uint64_t deadline, uint64_t period)
{
	struct sched_attr_v0 a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.sched_policy = SCHED_DEADLINE;
	a.sched_runtime = runtime;
	a.sched_deadline = deadline;
	a.sched_period = period;
	if (syscall(SYS_sched_setattr, tid, &a, 0) != 0) {
		int e = errno;
		if (e == EPERM && quiet_eperm)
			return -1;
		fprintf(stderr, "sched_setattr(DEADLINE %llu/%llu/%llu) tid %d: %s\n",
			(unsigned long long)runtime, (unsigned long long)deadline,
			(unsigned long long)period, (int)tid, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

static int set_other(pid_t tid)
{
	struct sched_attr_v0 a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.sched_policy = SCHED_OTHER;
	if (syscall(SYS_sched_setattr, tid, &a, 0) != 0) {
		fprintf(stderr, "sched_setattr(OTHER) tid %d: %s\n", (int)tid, strerror(errno));
		return -1;
	}
	return 0;
}

static int promote(pid_t tid)
{
	return set_dl(tid, 2 * MS, 10 * MS, 10 * MS);
}

static int repromote(pid_t tid)
{
	if (variant == 3)
		return set_dl(tid, 3 * MS, 20 * MS, 20 * MS);
	return promote(tid);
}

static int park(pid_t tid)
{
	return set_dl(tid, PARK_RUNTIME, PARK_PERIOD, PARK_PERIOD);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	volatile uint64_t sink = 0;
	w->tid = (pid_t)syscall(SYS_gettid);
	while (!w->stop) {
		/* spin ~1 ms of own CPU time (reads its own thread CPU clock) */
		uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		while (now_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < MS && !w->stop)
			for (int k = 0; k < 1000; k++)
				sink += (uint64_t)k;
		if (variant == 1)
			sleep_ms(1);
	}
	return NULL;
}

static uint64_t wcpu(struct worker *w)
{
	return now_ns(w->clk);
}

/* CPU time the worker gets over the next `ms` milliseconds. */
static uint64_t watch(struct worker *w, unsigned ms)
{
	uint64_t c0 = wcpu(w);
	sleep_ms(ms);
	return wcpu(w) - c0;
}

/* total_bw of dl_rq[cpu] from debugfs, or -1. */
static long long read_total_bw(int cpu)
{
	FILE *f = fopen("/sys/kernel/debug/sched/debug", "r");
	char line[512], hdr[32];
	int in = 0;
	long long v = -1;
	if (!f)
		return -1;
	snprintf(hdr, sizeof(hdr), "dl_rq[%d]:", cpu);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, hdr, strlen(hdr)))
			in = 1;
		else if (in && strstr(line, ".dl_bw->total_bw")) {
			char *p = strchr(line, ':');
			if (p)
				v = atoll(p + 1);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Numeric value of the first line starting with `key` in `path`, or NAN-ish -1. */
static double read_field(const char *path, const char *key, const char *after)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int in = after == NULL;
	double v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *k = line + strspn(line, " ");
		if (!in) {
			in = !strncmp(k, after, strlen(after));
			continue;
		}
		if (!strncmp(k, key, strlen(key)) && k[strlen(key)] == ' ') {
			char *p = strchr(k, ':');
			if (p)
				v = atof(p + 1);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Diagnostics (best effort): the worker's dl.runtime and how far its
 * absolute deadline lies beyond CPU 0's rq clock, in seconds. */
static void dl_state(pid_t tid, double *runtime_ns, double *deadline_in_s)
{
	char path[64], cpuhdr[16];
	snprintf(path, sizeof(path), "/proc/self/task/%d/sched", (int)tid);
	snprintf(cpuhdr, sizeof(cpuhdr), "cpu#%d,", cpu >= 0 ? cpu : 0);
	*runtime_ns = read_field(path, "dl.runtime", NULL);
	double dl = read_field(path, "dl.deadline", NULL);
	double clk_ms = read_field("/sys/kernel/debug/sched/debug", ".clock", cpuhdr);
	*deadline_in_s = (dl > 0 && clk_ms > 0) ? (dl - clk_ms * 1e6) / 1e9 : 0;
}

static void *sleeper_main(void *arg)
{
	*(volatile pid_t *)arg = (pid_t)syscall(SYS_gettid);
	sleep_ms(50);
	return NULL;
}

/* Wait (up to EPERM_WAIT_MS) until this process may use SCHED_DEADLINE with
 * its affinity, probing with a sleeping helper thread that is parked
 * (bandwidth 0) and demoted again at once.  Returns 0 when usable. */
static int wait_for_root_domain(void)
{
	int first = 1;
	for (unsigned waited = 0;; waited += 200) {
		pthread_t th;
		volatile pid_t tid = 0;
		int r, e;
		if (pthread_create(&th, NULL, sleeper_main, (void *)&tid) != 0)
			return -1;
		while (!tid)
			sleep_ms(1);
		sleep_ms(5);
		quiet_eperm = 1;
		r = park(tid);
		e = errno;
		quiet_eperm = 0;
		if (r == 0)
			set_other(tid);
		pthread_join(th, NULL);
		if (r == 0)
			return 0;
		if (e != EPERM || waited >= EPERM_WAIT_MS || interrupted)
			return -1;
		if (first)
			fprintf(stderr, "EPERM: SCHED_DEADLINE needs the thread's affinity to cover its whole\n"
				"root domain; CPU %d must be a root domain of its own (or run with\n"
				"CPU=-1 to not pin).  Waiting up to %d s for that.\n",
				cpu, EPERM_WAIT_MS / 1000);
		first = 0;
		sleep_ms(200);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Returns 0 = ok, 1 = stuck+recovered, 2 = stuck+not recovered, -1 = error,
 * -2 = worker did not exit, -3 = CPU not its own root domain (EPERM at start),
 * -4 = EPERM in mid-trial (root domain changed under us) */
static int trial(int i)
{
	struct worker w;
	int rc = -1, stuck = 0, recovered = 0, promoted = 0;
	unsigned park_wait = variant == 2 || variant == 5 ? 0 : 5 + (unsigned)(i * 7) % 16; /* 5..20 ms */
	unsigned demote_wait = variant == 5 ? 12 + (unsigned)(i * 3) % 9                   /* 12..20 ms */
			       : 1 + (unsigned)(i * 3) % 7;                                  /* 1..7 ms */
	uint64_t c_dl = 0, c_park = 0, c_tail = 0, c_other = 0, c_after = 0, c_rec = 0, p0;
	double dl_rt = 0, dl_in = 0;
	struct timespec ts;

	memset(&w, 0, sizeof(w));
	if (pthread_create(&w.th, NULL, worker_main, &w) != 0) {
		perror("pthread_create");
		return -1;
	}
	while (!w.tid)
		sleep_ms(1);
	if (pthread_getcpuclockid(w.th, &w.clk) != 0) {
		fprintf(stderr, "pthread_getcpuclockid failed\n");
		goto cleanup;
	}
	sleep_ms(5);

	if (promote(w.tid)) {
		rc = errno == EPERM ? -3 : -1;
		goto cleanup;
	}
	promoted = 1;
	c_dl = watch(&w, 50);

	p0 = wcpu(&w);
	if (park(w.tid)) {
		rc = errno == EPERM ? -4 : -1;
		goto cleanup;
	}
	if (park_wait > 2) {
		sleep_ms(park_wait - 2);
		uint64_t p1 = wcpu(&w);
		sleep_ms(2);
		c_tail = wcpu(&w) - p1; /* ~0 if throttled */
	} else {
		sleep_ms(park_wait);
	}
	c_park = wcpu(&w) - p0;

	if (set_other(w.tid))
		goto cleanup;
	c_other = watch(&w, demote_wait);

	if (repromote(w.tid)) {
		rc = errno == EPERM ? -4 : -1;
		goto cleanup;
	}
	c_after = watch(&w, WATCH_MS);
	stuck = c_after < STUCK_NS;
	if (stuck)
		dl_state(w.tid, &dl_rt, &dl_in);

	if (stuck) {
		/* variant 4 demotes the way pacer does: park first */
		if (variant == 4 && park(w.tid)) {
			rc = errno == EPERM ? -4 : -1;
			goto cleanup;
		}
		if (set_other(w.tid))
			goto cleanup;
		sleep_ms(50);
		if (repromote(w.tid)) {
			rc = errno == EPERM ? -4 : -1;
			goto cleanup;
		}
		c_rec = watch(&w, REC_WATCH_MS);
		recovered = c_rec >= STUCK_NS;
	}
	rc = stuck ? (recovered ? 1 : 2) : 0;

cleanup:
	/* park first: its bandwidth rounds to 0, so the deferred (0-lag)
	 * release after the demotion has nothing left to give back */
	if (!promoted) {
		set_other(w.tid);
	} else if (park(w.tid) == 0) {
		set_other(w.tid);
	} else {
		/* Cannot park (the root domain changed under us?).  A deadline
		 * worker that still runs is best left to exit as SCHED_DEADLINE:
		 * that releases its bandwidth at once. */
		if (sched_getscheduler(w.tid) != SCHED_DEADLINE || watch(&w, 30) == 0) {
			set_other(w.tid);
			fprintf(stderr, "trial %d: demoted without parking; a deferred bandwidth release may\n"
				"  make total_bw wrong later, until the next root-domain rebuild\n", i);
		}
	}
	w.stop = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	if (pthread_timedjoin_np(w.th, NULL, &ts) != 0) {
		fprintf(stderr, "trial %d: worker tid %d did not exit within 5 s\n", i, (int)w.tid);
		return -2;
	}

	printf("trial %2d: park_wait=%2ums demote_wait=%ums | cpu: dl50ms=%5.2fms parked=%6.1fus(last2ms=%.1fus) other=%5.2fms after=%6.2fms -> %s",
	       i, park_wait, demote_wait, c_dl / 1e6, c_park / 1e3, c_tail / 1e3,
	       c_other / 1e6, c_after / 1e6,
	       rc == -3 ? "NOT RUN (EPERM)" : rc == -4 ? "ABORTED (EPERM: root domain changed)"
	       : rc < 0 ? "ERROR" : stuck ? "STUCK" : "ok");
	if (stuck)
		printf(" (dl.runtime=%.0fns, deadline in %+.1fs: %s)", dl_rt, dl_in,
		       dl_in > 0 ? "throttled until the parked deadline"
		       : dl_in < 0 ? "deadline passed, no replenishment pending" : "?");
	if (stuck && rc > 0)
		printf(" | recovery: %6.2fms -> %s", c_rec / 1e6,
		       recovered ? "recovered" : "still stuck");
	printf("\n");
	fflush(stdout);
	return rc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	int stuck = 0, rec = 0, done = 0, errors = 0;
	cpu_set_t set;
	struct sigaction sa;

	if (argc > 2)
		variant = atoi(argv[2]);
	if (argc > 3)
		cpu = atoi(argv[3]);
	if (n <= 0)
		n = 20;

	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (wait_for_root_domain() != 0) {
		fprintf(stderr, "cannot use SCHED_DEADLINE here; giving up\n");
		return 1;
	}
	int bwcpu = cpu >= 0 ? cpu : 0;
	long long bw0 = read_total_bw(bwcpu);
	printf("dl-reenter: %d trials, variant %d, cpu %d, total_bw(cpu%d) before=%lld\n",
	       n, variant, cpu, bwcpu, bw0);

	for (int i = 0; i < n && !interrupted; i++) {
		int r = trial(i);
		if (r == -2)
			return 2; /* a worker is still around; do not pretend */
		if (r == -3 || r == -4) {
			errors++;
			break; /* the root domain is not (or no longer) usable */
		}
		if (r < 0) {
			errors++;
			if (errors >= 3)
				break;
			continue;
		}
		done++;
		if (r > 0)
			stuck++;
		if (r == 1)
			rec++;
	}

	sleep_ms(20);
	long long bw1 = read_total_bw(bwcpu);
	printf("stuck: %d of %d; recovered by demote+50ms+re-promote: %d of %d (variant %d, errors %d)\n",
	       stuck, done, rec, stuck, variant, errors);
	printf("total_bw(cpu%d) before=%lld after=%lld%s\n", bwcpu, bw0, bw1,
	       bw0 == bw1 ? "" : "  <-- MISMATCH (or the root domain changed during the run)");
	return errors ? 1 : 0;
}
