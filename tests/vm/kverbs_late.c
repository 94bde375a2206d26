// SPDX-License-Identifier: MIT
/*
 * kverbs: a slow or stopped daemon (docs/security.md, "The kernel module").
 * A call the module gives up on (timeout, fatal signal) must leave nothing
 * behind: the next open works, the application's memory is not touched
 * after its MR is gone, a destroy leaves at once on SIGKILL, and the daemon
 * goes on serving. vm_test.sh runs these against kmock --slow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kverbs.h"

static void sleep_s(double s)
{
	usleep((useconds_t)(s * 1e6));
}

/* The daemon still serves: a context with a PD, opened and closed. */
static bool serves(void)
{
	struct ctx c;
	uint32_t pd;
	bool ok = open_ctx(&c) == 0 && alloc_pd(&c, &pd) == 0 &&
		  dealloc(&c, IB_USER_VERBS_CMD_DEALLOC_PD, pd) == 0;

	close(c.fd);
	return ok;
}

/* kmock --slow hello:MS with MS above call_timeout_ms: the first open times
 * out, the daemon answers it WAIT seconds later. Before the fix the late
 * HELLO left the daemon a context under an id the module handed out again,
 * and every later open failed with EALREADY.
 */
int t_latehello(double wait)
{
	struct ctx c;
	int err = open_ctx(&c);

	check(err == ETIMEDOUT, "open under a stalled daemon: %s", strerror(err));
	close(c.fd);
	sleep_s(wait);
	for (int i = 0; i < 3; i++) {
		err = open_ctx(&c);
		check(err == 0, "open %d after the late HELLO reply: %s", i + 1, strerror(err));
		close(c.fd);
	}
	check(serves(), "the daemon serves PD requests");
	return 0;
}

/* kmock --slow dereg:MS: DEREG_MR times out; the daemon, not having seen it
 * yet, then reads and writes the whole MR through its mapping. The module
 * released the pin meanwhile: the daemon must neither die (SIGBUS) nor
 * reach the application's pages, which keep their bytes.
 */
int t_latedereg(double wait)
{
	size_t len = 1 << 16;
	uint8_t *buf = page_buf(len);
	struct ctx c;
	struct mr mr;
	uint32_t pd;
	size_t bad = 0;
	double t0;
	int err;

	memset(buf, 0x5A, len);
	if (!check(open_ctx(&c) == 0 && alloc_pd(&c, &pd) == 0 &&
			   reg_mr(&c, pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
				  &mr) == 0,
		   "context, PD, writable MR"))
		return 1;
	t0 = now_s();
	err = dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mr.handle);
	check(err == 0, "dereg under a stalled daemon succeeds (destroys cannot fail): %s after %.2f s",
	      strerror(err), now_s() - t0);
	sleep_s(wait);
	for (size_t i = 0; i < len; i++)
		bad += buf[i] != 0x5A;
	check(bad == 0, "the application's buffer is untouched by the daemon's late writes (%zu bytes differ)",
	      bad);
	check(alloc_pd(&c, &pd) == 0, "the same context still works");
	close(c.fd);
	check(serves(), "the daemon serves a new context");
	return 0;
}

/* kmock --slow dereg:MS, call_timeout_ms above LIMIT: a program killed in
 * DEREG_MR leaves well before the daemon answers (destroys wait killably).
 */
int t_killdestroy(double limit)
{
	int ready[2];
	pid_t pid;
	int status;
	char b;
	double t0;

	if (pipe(ready) != 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		size_t len = 1 << 16;
		uint8_t *buf = page_buf(len);
		struct ctx c;
		struct mr mr;
		uint32_t pd;

		if (open_ctx(&c) || alloc_pd(&c, &pd) ||
		    reg_mr(&c, pd, buf, len, IBV_ACCESS_LOCAL_WRITE, &mr))
			_exit(3);
		if (write(ready[1], "r", 1) != 1)
			_exit(4);
		dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mr.handle);
		_exit(0);
	}
	close(ready[1]);
	if (!check(read(ready[0], &b, 1) == 1, "child registered its MR"))
		return 1;
	usleep(500000);	/* in DEREG_MR now */
	t0 = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	check(WIFSIGNALED(status) && now_s() - t0 < limit, "killed in DEREG_MR, exits in %.3f s",
	      now_s() - t0);
	return 0;
}

/* sroced's uid policy on the kernel path: a uid it does not allow gets
 * EACCES from ibv_open_device (GET_CONTEXT), as on the socket path.
 */
int t_uid(unsigned int uid, int want)
{
	struct ctx c;
	int err;

	if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
		check(false, "setuid(%u): %s", uid, strerror(errno));
		return 1;
	}
	err = open_ctx(&c);
	check(err == want, "uid %u opens the device: %s (want %s)", uid, strerror(err), strerror(want));
	close(c.fd);
	return 0;
}
