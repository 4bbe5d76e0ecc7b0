// SPDX-License-Identifier: GPL-2.0
/*
 * rr: a request/response load with the parking design's shape: each
 * client connection sends a request of REQ bytes and reads a response of
 * RESP bytes, back to back, for a fixed time. Built on the host by
 * schedsteal-guests (the guest sees the host's files).
 *
 *   rr server PORT [REQ RESP]
 *       Serve until killed: a thread per connection reads REQ bytes and
 *       answers with RESP bytes.
 *   rr client ADDR PORT WORKERS SECONDS [REQ RESP]
 *       WORKERS threads, each with its own connection, for SECONDS; then
 *       print one line: "transactions N seconds S workers W tps T".
 *
 * REQ defaults to 200 and RESP to 30000, the design's uperf profile.
 * Exit 0; 1 with a message on stderr when a socket call fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t req_len = 200, resp_len = 30000;
static atomic_long transactions;
static atomic_int stop;

static void die(const char *what)
{
	fprintf(stderr, "rr: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Move exactly len bytes; 0 on success, -1 when the peer went away. */
static int xfer(int fd, char *buf, size_t len, int out)
{
	while (len) {
		ssize_t n = out ? send(fd, buf, len, MSG_NOSIGNAL) : recv(fd, buf, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char *req = malloc(req_len), *resp = calloc(1, resp_len);

	if (!req || !resp)
		die("malloc");
	while (!xfer(fd, req, req_len, 0) && !xfer(fd, resp, resp_len, 1))
		;
	close(fd);
	free(req);
	free(resp);
	return NULL;
}

static void __attribute__((noreturn)) server(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 256))
		die("bind/listen");
	printf("listening %d\n", port);
	fflush(stdout);
	for (;;) {
		pthread_t t;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, serve, (void *)(long)fd))
			die("pthread_create");
		pthread_detach(t);
	}
}

static struct sockaddr_in peer;

static void *client_worker(void *arg)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	char *req = calloc(1, req_len), *resp = malloc(resp_len);

	(void)arg;
	if (fd < 0 || !req || !resp)
		die("socket");
	if (connect(fd, (struct sockaddr *)&peer, sizeof(peer)))
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (!atomic_load(&stop)) {
		if (xfer(fd, req, req_len, 1) || xfer(fd, resp, resp_len, 0))
			die("transfer");
		atomic_fetch_add(&transactions, 1);
	}
	close(fd);
	free(req);
	free(resp);
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int client(const char *addr, int port, int workers, double seconds)
{
	pthread_t *t = calloc(workers, sizeof(*t));
	struct timespec ts = { .tv_sec = (time_t)seconds,
			       .tv_nsec = (long)((seconds - (time_t)seconds) * 1e9) };
	double t0, t1;
	int i;

	peer.sin_family = AF_INET;
	peer.sin_port = htons(port);
	if (!t || inet_pton(AF_INET, addr, &peer.sin_addr) != 1) {
		fprintf(stderr, "rr: bad address %s\n", addr);
		return 1;
	}
	t0 = now();
	for (i = 0; i < workers; i++)
		if (pthread_create(&t[i], NULL, client_worker, NULL))
			die("pthread_create");
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	atomic_store(&stop, 1);
	for (i = 0; i < workers; i++)
		pthread_join(t[i], NULL);
	t1 = now();
	printf("transactions %ld seconds %.3f workers %d tps %.1f\n",
	       atomic_load(&transactions), t1 - t0, workers,
	       atomic_load(&transactions) / (t1 - t0));
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && !strcmp(argv[1], "server")) {
		if (argc == 5) {
			req_len = strtoul(argv[3], NULL, 10);
			resp_len = strtoul(argv[4], NULL, 10);
		}
		if (!req_len || !resp_len || (argc != 3 && argc != 5))
			goto usage;
		server(atoi(argv[2]));
	}
	if (argc >= 6 && !strcmp(argv[1], "client")) {
		if (argc == 8) {
			req_len = strtoul(argv[6], NULL, 10);
			resp_len = strtoul(argv[7], NULL, 10);
		}
		if (!req_len || !resp_len || (argc != 6 && argc != 8) ||
		    atoi(argv[4]) < 1 || atof(argv[5]) <= 0)
			goto usage;
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
	}
usage:
	fprintf(stderr, "usage: rr server PORT [REQ RESP] | "
		"rr client ADDR PORT WORKERS SECONDS [REQ RESP]\n");
	return 2;
}
