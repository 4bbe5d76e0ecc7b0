// SPDX-License-Identifier: GPL-2.0
/*
 * busyloop ITERATIONS: a loop of a fixed instruction count, for checking
 * the lab's clocks (docs/lab.md). It prints "ready", waits until its
 * standard input reaches end of file (the caller's start signal: the
 * caller closes every copy's input once all are ready), runs ITERATIONS
 * rounds of the loop, and prints the CLOCK_MONOTONIC times (ns) at which
 * the loop started and ended: "START END".
 *
 * The loop body is a few register instructions and a branch the compiler
 * cannot remove (the asm statement), so that its instruction count, not
 * a cache or the memory system, sets its length.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	unsigned long long start, end, n, i;
	char *endp, buf[64];
	ssize_t r;

	if (argc != 2) {
		fprintf(stderr, "usage: busyloop ITERATIONS (then close stdin to start)\n");
		return 2;
	}
	errno = 0;
	n = strtoull(argv[1], &endp, 10);
	if (errno || *endp || endp == argv[1] || n == 0) {
		fprintf(stderr, "busyloop: ITERATIONS must be a positive number, not '%s'\n",
			argv[1]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	do {
		r = read(0, buf, sizeof(buf));
	} while (r > 0 || (r < 0 && errno == EINTR));
	if (r < 0) {
		perror("busyloop: read");
		return 1;
	}
	start = now_ns();
	for (i = 0; i < n; i++)
		__asm__ __volatile__("" : "+r"(i));
	end = now_ns();
	printf("%llu %llu\n", start, end);
	return 0;
}
