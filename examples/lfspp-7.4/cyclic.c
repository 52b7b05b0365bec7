/* A periodic "player" in the cyclic-loop idiom (cyclictest, the RT wiki's examples): each job
 * computes, waits twice for "I/O" (relative sleeps), then sleeps until the next expiry of an
 * absolute grid with clock_nanosleep(TIMER_ABSTIME) -- also when that expiry is already past.
 *
 * usage: cyclic PERIOD_NS SECONDS WORK_NS   (WORK_NS split 4:2:1 over the three computations)
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void compute(long long ns)
{
	long long end = now_ns() + ns;
	while (now_ns() < end)
		;
}

static void io_wait(long long ns)
{
	struct timespec t = { ns / 1000000000LL, ns % 1000000000LL };
	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	long long period = atoll(argv[1]), work = atoll(argv[3]);
	long long end = now_ns() + (long long)(atof(argv[2]) * 1e9);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (now_ns() < end) {
		compute(work * 4 / 7);
		io_wait(1000000);
		compute(work * 2 / 7);
		io_wait(500000);
		compute(work / 7);
		next.tv_sec += period / 1000000000LL;
		next.tv_nsec += period % 1000000000LL;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	return 0;
}
