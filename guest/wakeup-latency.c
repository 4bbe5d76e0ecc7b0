// SPDX-License-Identifier: GPL-2.0
/*
 * wakeup-latency: a small schbench-like wakeup latency benchmark.
 *
 * M message threads each own W worker threads.  In a loop, a message thread
 * stamps a request for each of its workers with the current time and wakes
 * it (futex), then sleeps until all its workers are done.  A woken worker
 * records now - stamp as its wakeup latency, spins on the clock for -b usec
 * ("think time"), then goes back to sleep until the next request.  After -r
 * seconds everything stops and the latency percentiles are printed:
 *
 *   # wakeup-latency: 2 message threads x 4 workers, 5 s, busy 50 usec
 *   p50 12
 *   p90 20
 *   p99 55
 *   p99.9 120
 *   max 340
 *   wakeups 123456
 *
 * (all values in usec except wakeups).  Percentiles come from a histogram
 * that is exact below 1024 usec and has 64 buckets per power of two above
 * (under 1.6% error); max is exact.
 *
 * Build: gcc -O2 -Wall -Wextra -pthread -o wakeup-latency wakeup-latency.c
 * Usage: wakeup-latency [-m msg_threads] [-t workers] [-r seconds] [-b usec]
 * Exit status: 0 ok, 1 runtime failure, 2 bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINEAR_BUCKETS 1024u            /* exact for 0..1023 usec */
#define SUB_BITS 6u
#define SUB_BUCKETS (1u << SUB_BITS)    /* per power of two above that */
#define OCTAVES 31u                     /* 2^10 .. 2^41 usec */
#define NBUCKETS (LINEAR_BUCKETS + OCTAVES * SUB_BUCKETS)

enum { W_IDLE = 0, W_POSTED = 1, W_STOP = 2 };

struct hist {
	uint64_t count[NBUCKETS];
	uint64_t total;
	uint64_t max;
};

struct msg_thread;

struct worker {
	_Atomic int state;              /* futex word */
	_Atomic uint64_t posted_ns;     /* request time stamp */
	struct msg_thread *msg;
	struct hist hist;
	pthread_t tid;
};

struct msg_thread {
	_Atomic int pending;            /* futex word: workers still busy */
	struct worker *workers;
	pthread_t tid;
};

static int opt_msg = 2;
static int opt_workers = 4;
static int opt_runtime = 5;
static int opt_busy_us = 50;
static _Atomic int stopping;

static long futex(_Atomic int *addr, int op, int val)
{
	return syscall(SYS_futex, (int *)addr, op, val, NULL, NULL, 0);
}

static void futex_wait(_Atomic int *addr, int val)
{
	futex(addr, FUTEX_WAIT_PRIVATE, val);  /* EAGAIN/EINTR: caller rechecks */
}

static void futex_wake(_Atomic int *addr, int n)
{
	futex(addr, FUTEX_WAKE_PRIVATE, n);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned int bucket_of(uint64_t usec)
{
	unsigned int exp, sub, idx;

	if (usec < LINEAR_BUCKETS)
		return (unsigned int)usec;
	exp = 63u - (unsigned int)__builtin_clzll(usec);     /* >= 10 */
	sub = (unsigned int)(usec >> (exp - SUB_BITS)) & (SUB_BUCKETS - 1u);
	idx = LINEAR_BUCKETS + (exp - 10u) * SUB_BUCKETS + sub;
	return idx < NBUCKETS ? idx : NBUCKETS - 1u;
}

static uint64_t bucket_value(unsigned int idx)
{
	unsigned int exp, sub;

	if (idx < LINEAR_BUCKETS)
		return idx;
	exp = 10u + (idx - LINEAR_BUCKETS) / SUB_BUCKETS;
	sub = (idx - LINEAR_BUCKETS) % SUB_BUCKETS;
	return (1ull << exp) + ((uint64_t)sub << (exp - SUB_BITS));
}

static void hist_add(struct hist *h, uint64_t usec)
{
	h->count[bucket_of(usec)]++;
	h->total++;
	if (usec > h->max)
		h->max = usec;
}

static void hist_merge(struct hist *into, const struct hist *from)
{
	unsigned int i;

	for (i = 0; i < NBUCKETS; i++)
		into->count[i] += from->count[i];
	into->total += from->total;
	if (from->max > into->max)
		into->max = from->max;
}

/* Value at or below which permille/1000 of the samples lie. */
static uint64_t hist_percentile(const struct hist *h, unsigned int permille)
{
	uint64_t rank, seen = 0;
	unsigned int i;

	if (h->total == 0)
		return 0;
	rank = (h->total * permille + 999u) / 1000u;
	if (rank == 0)
		rank = 1;
	for (i = 0; i < NBUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			uint64_t v = bucket_value(i);
			return v < h->max ? v : h->max;
		}
	}
	return h->max;
}

static void spin_for(uint64_t usec)
{
	uint64_t end;

	if (usec == 0)
		return;
	end = now_ns() + usec * 1000u;
	while (now_ns() < end)
		;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int s;

	for (;;) {
		while ((s = atomic_load(&w->state)) == W_IDLE)
			futex_wait(&w->state, W_IDLE);
		if (s == W_STOP)
			break;
		uint64_t now = now_ns();
		uint64_t posted = atomic_load(&w->posted_ns);

		hist_add(&w->hist, now > posted ? (now - posted) / 1000u : 0);
		spin_for((uint64_t)opt_busy_us);
		atomic_store(&w->state, W_IDLE);
		if (atomic_fetch_sub(&w->msg->pending, 1) == 1)
			futex_wake(&w->msg->pending, 1);
	}
	return NULL;
}

static void *msg_main(void *arg)
{
	struct msg_thread *m = arg;
	int i, p;

	while (!atomic_load(&stopping)) {
		atomic_store(&m->pending, opt_workers);
		for (i = 0; i < opt_workers; i++) {
			struct worker *w = &m->workers[i];

			atomic_store(&w->posted_ns, now_ns());
			atomic_store(&w->state, W_POSTED);
			futex_wake(&w->state, 1);
		}
		while ((p = atomic_load(&m->pending)) != 0)
			futex_wait(&m->pending, p);
	}
	for (i = 0; i < opt_workers; i++) {
		atomic_store(&m->workers[i].state, W_STOP);
		futex_wake(&m->workers[i].state, 1);
	}
	return NULL;
}

static void usage(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s [-m msg_threads] [-t workers] [-r seconds] [-b usec]\n"
		"  -m N  message threads (default %d)\n"
		"  -t N  worker threads per message thread (default %d)\n"
		"  -r N  runtime in seconds (default %d)\n"
		"  -b N  busy (spin) time per wakeup in usec (default %d)\n"
		"  -h    this help\n"
		"Prints p50 p90 p99 p99.9 max wakeup latency (usec) and wakeups.\n",
		prog, opt_msg, opt_workers, opt_runtime, opt_busy_us);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static void sleep_seconds(int seconds)
{
	struct timespec ts = { .tv_sec = seconds, .tv_nsec = 0 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	struct msg_thread *msgs;
	struct hist *all;
	int c, i, j, err;

	opterr = 0;
	while ((c = getopt(argc, argv, "m:t:r:b:h")) != -1) {
		int bad = 0;

		switch (c) {
		case 'm':
			bad = parse_int(optarg, 1, 4096, &opt_msg);
			break;
		case 't':
			bad = parse_int(optarg, 1, 4096, &opt_workers);
			break;
		case 'r':
			bad = parse_int(optarg, 1, 86400, &opt_runtime);
			break;
		case 'b':
			bad = parse_int(optarg, 0, 10000000, &opt_busy_us);
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			bad = 1;
			break;
		}
		if (bad) {
			if (c == '?')
				fprintf(stderr, "%s: unknown option or missing "
					"argument: -%c\n", argv[0], optopt);
			else
				fprintf(stderr, "%s: bad value for -%c: %s\n",
					argv[0], c, optarg);
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument: %s\n", argv[0], argv[optind]);
		usage(stderr, argv[0]);
		return 2;
	}

	msgs = calloc((size_t)opt_msg, sizeof(*msgs));
	all = calloc(1, sizeof(*all));
	if (!msgs || !all) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return 1;
	}
	for (i = 0; i < opt_msg; i++) {
		msgs[i].workers = calloc((size_t)opt_workers, sizeof(struct worker));
		if (!msgs[i].workers) {
			fprintf(stderr, "%s: out of memory\n", argv[0]);
			return 1;
		}
		for (j = 0; j < opt_workers; j++) {
			struct worker *w = &msgs[i].workers[j];

			w->msg = &msgs[i];
			err = pthread_create(&w->tid, NULL, worker_main, w);
			if (err) {
				fprintf(stderr, "%s: pthread_create: %s\n", argv[0],
					strerror(err));
				return 1;
			}
		}
	}
	for (i = 0; i < opt_msg; i++) {
		err = pthread_create(&msgs[i].tid, NULL, msg_main, &msgs[i]);
		if (err) {
			fprintf(stderr, "%s: pthread_create: %s\n", argv[0],
				strerror(err));
			return 1;
		}
	}

	sleep_seconds(opt_runtime);
	atomic_store(&stopping, 1);

	for (i = 0; i < opt_msg; i++) {
		pthread_join(msgs[i].tid, NULL);
		for (j = 0; j < opt_workers; j++) {
			pthread_join(msgs[i].workers[j].tid, NULL);
			hist_merge(all, &msgs[i].workers[j].hist);
		}
	}

	printf("# wakeup-latency: %d message threads x %d workers, %d s, "
	       "busy %d usec\n", opt_msg, opt_workers, opt_runtime, opt_busy_us);
	printf("p50 %" PRIu64 "\n", hist_percentile(all, 500));
	printf("p90 %" PRIu64 "\n", hist_percentile(all, 900));
	printf("p99 %" PRIu64 "\n", hist_percentile(all, 990));
	printf("p99.9 %" PRIu64 "\n", hist_percentile(all, 999));
	printf("max %" PRIu64 "\n", all->max);
	printf("wakeups %" PRIu64 "\n", all->total);

	for (i = 0; i < opt_msg; i++)
		free(msgs[i].workers);
	free(msgs);
	free(all);
	return 0;
}
