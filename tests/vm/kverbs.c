// SPDX-License-Identifier: MIT
/*
 * kverbs: an application of rdma_sroce.ko that speaks the uverbs write()
 * ABI directly, doing what libsroce's kernel path will do (docs/kmod.md):
 * GET_CONTEXT, objects with the driver data of sroce_abi.h, rings mapped
 * from the uverbs fd, work requests written into them, doorbells as empty
 * POST_SEND / POST_RECV, completion channels read the kernel's way.
 *
 *   kverbs objects|faults|nodaemon|exit-live|death|timeout|killwait [DEV]
 *   kverbs latehello|latedereg DEV WAIT | killdestroy DEV LIMIT | uid DEV UID ERRNO
 *
 * Prints "PASS <check>" / "FAIL <check>" lines and "RESULT <test> <n>
 * checks <f> failures"; exits 1 on any failure. `death` and the VM script
 * coordinate through files in /tmp (see vm_test.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kverbs.h"

static const char *dev = "sroce0";

static int t_objects(void)
{
	struct ctx c;
	struct ib_uverbs_query_device qd = { 0 };
	struct ib_uverbs_query_device_resp dr = { 0 };
	struct ib_uverbs_query_port qpt = { .port_num = 1 };
	struct ib_uverbs_query_port_resp pr = { 0 };
	uint32_t pd, events;
	size_t blen = 1 << 16;
	uint8_t *src = page_buf(blen), *dst = page_buf(blen), *ro = page_buf(8192);
	struct mr msrc = { 0 }, mdst = { 0 }, mro = { 0 };
	struct cq cq = { 0 };
	struct srq srq = { 0 };
	struct qp qp = { 0 }, qp2 = { 0 };
	struct sroce_cqe wc[4];
	struct ib_uverbs_comp_event_desc ev;
	struct ib_uverbs_async_event_desc aev;
	uint8_t gid[16];
	int chan, sgid, n;

	if (!check(open_ctx(&c) == 0, "get_context on %s", uverbs_path))
		return 1;
	check(c.k.abi_version == SROCE_KABI_VERSION && c.k.ctx > 0,
	      "driver data: kernel abi %u, context %u", c.k.abi_version, c.k.ctx);
	check(uv(c.fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &qd, sizeof(qd), &dr, sizeof(dr)) == 0 &&
		      dr.max_qp == 77 && dr.max_cqe == 4096 && dr.vendor_id == 0x5352 &&
		      dr.node_guid != 0 && dr.phys_port_cnt == 1,
	      "query_device: the daemon's limits (max_qp %u max_cqe %u vendor %#x)", dr.max_qp,
	      dr.max_cqe, dr.vendor_id);
	check(uv(c.fd, IB_USER_VERBS_CMD_QUERY_PORT, &qpt, sizeof(qpt), &pr, sizeof(pr)) == 0 &&
		      pr.state == IBV_PORT_ACTIVE && pr.link_layer == IBV_LINK_LAYER_ETHERNET &&
		      pr.gid_tbl_len == 32 && pr.active_mtu >= IBV_MTU_1024,
	      "query_port: active, Ethernet, 32 GIDs, mtu %u", pr.active_mtu);
	sgid = gid_index(dev, true, gid);
	check(sgid >= 0, "an IPv4 RoCE v2 GID in the table (index %d)", sgid);
	check(alloc_pd(&c, &pd) == 0, "alloc_pd");

	memcpy(src, "kverbs-mr", 9);
	for (size_t i = 16; i < blen; i++)
		src[i] = (uint8_t)(i * 7);
	memcpy(ro + 100, "kverbs-mr", 9);
	check(reg_mr(&c, pd, src, blen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &msrc) == 0,
	      "reg_mr src (lkey %#x)", msrc.lkey);
	check(!memcmp(src + blen - 8, "kmock-mr", 8),
	      "daemon wrote into the MR through its own mapping (zero copy)");
	check(reg_mr(&c, pd, dst, blen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mdst) == 0,
	      "reg_mr dst (rkey %#x)", mdst.rkey);
	check(reg_mr(&c, pd, ro + 100, 5000, 0, &mro) == 0 && memcmp(ro + 100 + 5000 - 8, "kmock-mr", 8),
	      "read-only MR: daemon could not write it");

	chan = comp_channel(&c);
	check(chan >= 0, "create_comp_channel (fd %d)", chan);
	check(create_cq(&c, 100, chan, 0xC0FFEE, &cq, sizeof(struct sroce_kring_resp)) == 0 &&
		      cq.r.h->size == 128 && cq.r.h->entry_size == 48,
	      "create_cq: ring of %u entries of %u bytes mapped from uverbs", cq.r.h->size,
	      cq.r.h->entry_size);
	check(create_srq(&c, pd, 16, &srq) == 0 && srq.r.h->size == 16, "create_srq: ring of 16");
	check(create_qp(&c, pd, cq.handle, 0, IBV_QPT_RC, 10, 0xAAAA, &qp) == 0 && qp.qpn > 1 &&
		      qp.sq.h->size == 16 && qp.sq.h->entry_size == 144 && qp.rq.h &&
		      qp.rq.h->size == 16 && qp.rq.h->entry_size == 48,
	      "create_qp RC: qpn %#x, SQ %ux%u, RQ ring", qp.qpn, qp.sq.h->size,
	      qp.sq.h->entry_size);
	check(qp.r.max_send_wr == 10 && qp.r.max_inline_data == 64, "create_qp caps as granted");
	check(create_qp(&c, pd, cq.handle, srq.handle, IBV_QPT_RC, 4, 0xBBBB, &qp2) == 0 && !qp2.rq.h,
	      "create_qp on the SRQ: no RQ ring");
	check(sgid >= 0 && to_rts(&c, &qp, gid, sgid, qp.qpn) == 0, "modify_qp RESET-INIT-RTR-RTS (with AV)");
	{
		struct ib_uverbs_query_qp q = { .qp_handle = qp.handle, .attr_mask = IBV_QP_STATE };
		struct ib_uverbs_query_qp_resp r = { 0 };

		check(uv(c.fd, IB_USER_VERBS_CMD_QUERY_QP, &q, sizeof(q), &r, sizeof(r)) == 0 &&
			      r.qp_state == IBV_QPS_RTS && r.max_send_wr == 10,
		      "query_qp: RTS (from the daemon)");
	}
	{
		struct ib_uverbs_modify_qp m = { .qkey = 0xbad };

		check(modify_qp(&c, &qp, IBV_QP_QKEY, &m) == EINVAL, "modify_qp refused by the daemon: EINVAL");
	}
	{
		struct ib_uverbs_create_ah req = { .user_handle = 1, .pd_handle = pd };
		struct {
			struct ib_uverbs_create_ah_resp r;
			struct sroce_kah_resp k;
		} resp = { 0 };

		memcpy(req.attr.grh.dgid, gid, 16);
		req.attr.grh.sgid_index = (uint8_t)sgid;
		req.attr.grh.hop_limit = 64;
		req.attr.is_global = 1;
		req.attr.port_num = 1;
		check(uv(c.fd, IB_USER_VERBS_CMD_CREATE_AH, &req, sizeof(req), &resp, sizeof(resp)) == 0 &&
			      resp.k.handle != 0,
		      "create_ah: daemon handle %u for UD work requests", resp.k.handle);
		check(dealloc(&c, IB_USER_VERBS_CMD_DESTROY_AH, resp.r.ah_handle) == 0, "destroy_ah");
	}

	/* A SEND through the rings, woken by the doorbell, completed with an
	 * event on the kernel's completion channel. Armed before posting
	 * (ibv_req_notify_cq, then post): the daemon serves every ring whenever
	 * anything wakes it (another program's doorbell), and a completion that
	 * lands before the CQ is armed raises no event. */
	__atomic_store_n(&cq.r.h->armed, 1, __ATOMIC_RELEASE);
	post_recv(&qp.rq, 0x1111, dst, 64, mdst.lkey);
	post_send(&qp.sq, 0x2222, IBV_WR_SEND, src + 16, 32, msrc.lkey, 0, 0);
	check(doorbell(&c, IB_USER_VERBS_CMD_POST_SEND, qp.handle) == 0, "doorbell: empty POST_SEND");
	{
		struct pollfd p = { .fd = chan, .events = POLLIN };

		check(poll(&p, 1, 5000) == 1 && read(chan, &ev, sizeof(ev)) == sizeof(ev) &&
			      ev.cq_handle == 0xC0FFEE,
		      "completion event from the kernel channel (cq_handle %#llx)",
		      (unsigned long long)ev.cq_handle);
	}
	n = poll_cq(&cq, wc, 2, 2.0);
	check(n == 2 && wc[0].wr_id == 0x1111 && wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == 32 &&
		      wc[1].wr_id == 0x2222 && wc[1].status == IBV_WC_SUCCESS,
	      "CQ ring: receive (32 bytes) and send completions");
	check(!memcmp(dst, src + 16, 32), "received bytes are the sent ones");

	/* RDMA WRITE by rkey; the doorbell through POST_RECV this time. */
	post_send(&qp.sq, 0x3333, IBV_WR_RDMA_WRITE, src + 64, 4000, msrc.lkey,
		  (uintptr_t)dst + 5000, mdst.rkey);
	check(doorbell(&c, IB_USER_VERBS_CMD_POST_RECV, qp.handle) == 0, "doorbell: empty POST_RECV");
	n = poll_cq(&cq, wc, 1, 2.0);
	check(n == 1 && wc[0].wr_id == 0x3333 && wc[0].status == IBV_WC_SUCCESS &&
		      !memcmp(dst + 5000, src + 64, 4000),
	      "RDMA WRITE of 4000 bytes landed in the target MR");
	{
		struct ib_uverbs_req_notify_cq rn = { .cq_handle = cq.handle, .solicited_only = 1 };

		check(uv(c.fd, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &rn, sizeof(rn), NULL, 0) == 0 &&
			      cq.r.h->armed == 2,
		      "REQ_NOTIFY_CQ (solicited) arms the ring: armed = %u", cq.r.h->armed);
	}

	/* IBA 11.6.3.1: Last WQE Reached, delivered on the async fd. */
	{
		struct ib_uverbs_modify_qp m = { .qp_state = IBV_QPS_ERR };

		check(modify_qp(&c, &qp2, IBV_QP_STATE, &m) == 0, "modify SRQ QP to ERR");
		check(wait_async(c.async_fd, IBV_EVENT_QP_LAST_WQE_REACHED, &aev, 5000) &&
			      aev.element == 0xBBBB,
		      "async event QP_LAST_WQE_REACHED for the QP (element %#llx)",
		      (unsigned long long)aev.element);
	}

	check(destroy_qp(&c, &qp2, &events) == 0 && events == 1, "destroy_qp: 1 async event reported");
	check(destroy_qp(&c, &qp, NULL) == 0, "destroy_qp");
	check(destroy_srq(&c, &srq) == 0, "destroy_srq");
	check(destroy_cq(&c, &cq, &events) == 0 && events >= 1, "destroy_cq: %u completion events reported",
	      events);
	check(dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, msrc.handle) == 0 &&
		      dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mdst.handle) == 0 &&
		      dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mro.handle) == 0,
	      "dereg_mr x3");
	check(dealloc(&c, IB_USER_VERBS_CMD_DEALLOC_PD, pd) == 0, "dealloc_pd");
	close(chan);
	close(c.async_fd);
	check(close(c.fd) == 0, "close the device");
	return 0;
}

static int t_faults(void)
{
	struct ctx c;
	struct cq cq = { 0 }, cq2 = { .handle = 0xffff };
	struct qp qp;
	struct mr mr;
	uint32_t pd;
	uint8_t *buf = page_buf(1 << 16);
	struct ib_uverbs_create_cq ccq = { .cqe = 4, .comp_channel = -1 };
	struct {
		struct ib_uverbs_create_cq_resp r;
		struct sroce_kring_resp k;
	} cres;

	if (!check(open_ctx(&c) == 0, "get_context"))
		return 1;
	check(alloc_pd(&c, &pd) == 0, "alloc_pd");
	check(create_cq(&c, 0, -1, 1, &cq, sizeof(struct sroce_kring_resp)) == EINVAL, "create_cq cqe=0: EINVAL");
	check(create_cq(&c, 5000, -1, 1, &cq, sizeof(struct sroce_kring_resp)) == EINVAL,
	      "create_cq above the daemon's max_cqe: EINVAL");
	check(uv(c.fd, IB_USER_VERBS_CMD_CREATE_CQ, &ccq, sizeof(ccq), &cres, sizeof(cres.r)) == EINVAL,
	      "create_cq without room for the driver data: EINVAL");
	check(create_cq(&c, 8, -1, 1, &cq, sizeof(struct sroce_kring_resp)) == 0, "create_cq");
	check(create_qp(&c, pd, cq.handle, 0, IBV_QPT_RC, 5000, 1, &qp) == EINVAL,
	      "create_qp above max_qp_wr: EINVAL");
	check(create_qp(&c, pd, cq.handle, 0, IBV_QPT_RAW_PACKET, 4, 1, &qp) == EOPNOTSUPP,
	      "create_qp raw packet: EOPNOTSUPP");
	check(reg_mr(&c, pd, (void *)0x10000, 4096, IBV_ACCESS_LOCAL_WRITE, &mr) == EFAULT,
	      "reg_mr of unmapped memory: EFAULT");
	check(reg_mr(&c, pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE, &mr) == EINVAL,
	      "reg_mr remote write without local write: EINVAL");
	/* Memory windows are carried (sroce_mw.c): an MR may allow binding them. */
	check(reg_mr(&c, pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, &mr) == 0 &&
		      dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mr.handle) == 0,
	      "reg_mr with MW_BIND, dereg_mr");
	check(create_qp(&c, pd, cq.handle, 0, IBV_QPT_UD, 4, 1, &qp) == 0, "create_qp UD");
	{
		struct {
			struct ib_uverbs_post_send p;
			struct ib_uverbs_send_wr w;
		} req = { .p = { .qp_handle = qp.handle, .wr_count = 1,
				 .wqe_size = sizeof(struct ib_uverbs_send_wr) } };
		struct ib_uverbs_post_send_resp resp;

		req.w.opcode = IBV_WR_SEND;
		check(uv(c.fd, IB_USER_VERBS_CMD_POST_SEND, &req, sizeof(req), &resp, sizeof(resp)) == EINVAL,
		      "work requests through uverbs (not the ring): EINVAL");
	}
	check(mmap(NULL, 4096, PROT_READ, MAP_SHARED, c.fd, 4096 * 999) == MAP_FAILED && errno == EINVAL,
	      "mmap of an unknown offset: EINVAL");
	check(destroy_cq(&c, &cq2, NULL) != 0, "destroy of a bad CQ handle fails");
	check(dealloc(&c, IB_USER_VERBS_CMD_DEALLOC_PD, pd) == EBUSY, "dealloc_pd with a QP: EBUSY");
	check(destroy_cq(&c, &cq, NULL) == EBUSY, "destroy_cq with a QP: EBUSY");
	cq.map = NULL;
	check(destroy_qp(&c, &qp, NULL) == 0, "destroy_qp");
	check(destroy_cq(&c, &cq, NULL) == 0, "destroy_cq");
	check(dealloc(&c, IB_USER_VERBS_CMD_DEALLOC_PD, pd) == 0, "dealloc_pd");
	close(c.fd);
	return 0;
}

static int t_nodaemon(void)
{
	struct ctx c;
	double t0 = now_s();
	int err = open_ctx(&c);

	check(err == ENOTCONN, "open without sroced: %s", strerror(err));
	check(now_s() - t0 < 1.0, "refused at once (%.3f s)", now_s() - t0);
	return 0;
}

/* Objects left to the kernel: the process exits holding them. */
static int t_exit_live(void)
{
	struct ctx c;
	uint32_t pd;
	struct mr mr;
	struct cq cq;
	struct srq srq;
	struct qp qp;
	uint8_t *buf = page_buf(1 << 20);

	if (!check(open_ctx(&c) == 0, "get_context"))
		return 1;
	check(alloc_pd(&c, &pd) == 0 &&
		      reg_mr(&c, pd, buf, 1 << 20, IBV_ACCESS_LOCAL_WRITE, &mr) == 0 &&
		      create_cq(&c, 64, comp_channel(&c), 1, &cq, sizeof(struct sroce_kring_resp)) == 0 &&
		      create_srq(&c, pd, 8, &srq) == 0 &&
		      create_qp(&c, pd, cq.handle, 0, IBV_QPT_RC, 8, 1, &qp) == 0 &&
		      create_qp(&c, pd, cq.handle, srq.handle, IBV_QPT_UD, 8, 2, &qp) == 0,
	      "objects created; exiting without destroying them");
	return 0;
}

static void touch(const char *path)
{
	close(open(path, O_CREAT | O_WRONLY, 0644));
}

/* The daemon dies under a sleeping program (vm_test.sh kills kmock once
 * /tmp/kverbs.ready exists). */
static int gone_ok(int err)
{
	return err == 0 || err == EIO;
}

static int t_death(void)
{
	struct ctx c;
	uint32_t pd, pd2;
	struct cq cq;
	struct qp qp;
	struct mr mr;
	uint8_t *buf = page_buf(1 << 16);
	struct ib_uverbs_comp_event_desc ev;
	struct ib_uverbs_async_event_desc aev = { 0 };
	int chan;
	struct pollfd p;
	double t0;

	if (!check(open_ctx(&c) == 0, "get_context"))
		return 1;
	chan = comp_channel(&c);
	check(alloc_pd(&c, &pd) == 0 && reg_mr(&c, pd, buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE, &mr) == 0 &&
		      create_cq(&c, 16, chan, 0xDEAD, &cq, sizeof(struct sroce_kring_resp)) == 0 &&
		      create_qp(&c, pd, cq.handle, 0, IBV_QPT_RC, 8, 7, &qp) == 0,
	      "objects created");
	__atomic_store_n(&cq.r.h->armed, 1, __ATOMIC_RELEASE);
	touch("/tmp/kverbs.ready");
	t0 = now_s();
	p = (struct pollfd){ .fd = chan, .events = POLLIN };
	/* The module runs the CQ's handler, then resets the device: once ib_uverbs
	 * has disassociated the context it has dropped the CQ's queued event, and
	 * the channel reads EIO (what a program sees of a removed HCA). Which of
	 * the two the sleeper reads depends on when it runs (a loaded TCG guest
	 * once read EIO); it must wake either way, at once.
	 */
	{
		int woke = poll(&p, 1, 20000);
		ssize_t n = woke == 1 ? read(chan, &ev, sizeof(ev)) : -1;
		int rerr = n < 0 ? errno : 0;

		check(woke == 1 && ((n == sizeof(ev) && ev.cq_handle == 0xDEAD) || (n < 0 && rerr == EIO)),
		      "sleeper in the completion channel woke when sroced died (%.2f s; %s)", now_s() - t0,
		      n == sizeof(ev) ? "its CQ's event" : n < 0 && rerr == EIO ? "EIO, already reset" : "neither");
	}
	check(__atomic_load_n(&cq.r.h->error, __ATOMIC_ACQUIRE) == 1 && qp.sq.h->error == 1 &&
		      qp.rq.h->error == 1,
	      "rings marked in error (CQ, SQ, RQ)");
	/* PORT_ERR comes too (the port goes down without sroced) */
	check(wait_async(c.async_fd, IBV_EVENT_DEVICE_FATAL, &aev, 5000),
	      "async event DEVICE_FATAL (last %u)", aev.event_type);
	check(alloc_pd(&c, &pd2) == EIO, "verbs after the death: EIO");
	/* The module then resets the device (docs/kmod.md): once ib_uverbs has
	 * disassociated the context, it destroyed the objects itself and a destroy
	 * answers EIO, which libibverbs takes as success; before, the destroy
	 * succeeds through the module.
	 */
	check(gone_ok(destroy_qp(&c, &qp, NULL)) && gone_ok(destroy_cq(&c, &cq, NULL)) &&
		      gone_ok(dealloc(&c, IB_USER_VERBS_CMD_DEREG_MR, mr.handle)) &&
		      gone_ok(dealloc(&c, IB_USER_VERBS_CMD_DEALLOC_PD, pd)),
	      "destroy verbs still succeed (or EIO once disassociated)");
	close(chan);
	close(c.async_fd);
	check(close(c.fd) == 0, "close");
	return 0;
}

/* kmock --hang: the daemon never answers. */
static int t_timeout(double limit)
{
	struct ctx c;
	double t0 = now_s();
	int err = open_ctx(&c);
	double dt = now_s() - t0;

	check(err == ETIMEDOUT, "unanswered request: %s", strerror(err));
	check(dt > limit * 0.8 && dt < limit * 3, "after %.2f s (call_timeout_ms %.0f)", dt, limit * 1000);
	return 0;
}

/* 1 once task PID sleeps in write(2) (/proc/PID/syscall names the system call
 * a blocked task is in; "running" reads as 0), 0 if it did not within LIMIT
 * seconds, -1 if it exited first. */
static int blocked_in_write(pid_t pid, double limit)
{
	char path[64], buf[128];
	double end = now_s() + limit;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	while (now_s() < end) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		if (n < 0)
			return -1;
		buf[n] = 0;
		if (strtol(buf, NULL, 10) == SYS_write)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* A program killed while waiting for sroced leaves at once: well before the
 * module's call timeout (vm_test.sh raises it above LIMIT for this check), so
 * the exit comes from the signal and not from the timeout. The kill comes only
 * once the child sleeps in its GET_CONTEXT write (a kill before it got there
 * would prove nothing). */
static int t_killwait(double limit)
{
	pid_t pid = fork();
	int status, blocked;
	double t0;

	if (pid == 0) {
		struct ctx c;

		open_ctx(&c);
		_exit(0);
	}
	blocked = blocked_in_write(pid, 20);
	check(blocked == 1, "the child sleeps in write(GET_CONTEXT) before the kill (%s)",
	      blocked == 0 ? "not within 20 s" : blocked < 0 ? "it exited" : "yes");
	t0 = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	check(WIFSIGNALED(status) && now_s() - t0 < limit, "killed waiter exits in %.3f s", now_s() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *t = argc > 1 ? argv[1] : "objects";

	if (argc > 2)
		dev = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (find_uverbs(dev)) {
		printf("FAIL no uverbs device for %s\n", dev);
		return 1;
	}
	if (!strcmp(t, "objects"))
		t_objects();
	else if (!strcmp(t, "faults"))
		t_faults();
	else if (!strcmp(t, "nodaemon"))
		t_nodaemon();
	else if (!strcmp(t, "exit-live"))
		t_exit_live();
	else if (!strcmp(t, "death"))
		t_death();
	else if (!strcmp(t, "timeout"))
		t_timeout(argc > 3 ? atof(argv[3]) : 2.0);
	else if (!strcmp(t, "killwait"))
		t_killwait(argc > 3 ? atof(argv[3]) : 1.0);
	else if (!strcmp(t, "latehello"))
		t_latehello(argc > 3 ? atof(argv[3]) : 3.0);
	else if (!strcmp(t, "latedereg"))
		t_latedereg(argc > 3 ? atof(argv[3]) : 3.0);
	else if (!strcmp(t, "killdestroy"))
		t_killdestroy(argc > 3 ? atof(argv[3]) : 5.0);
	else if (!strcmp(t, "uid") && argc > 4)
		t_uid((unsigned int)atoi(argv[3]), atoi(argv[4]));
	else {
		fprintf(stderr, "usage: kverbs objects|faults|nodaemon|exit-live|death|timeout|killwait [DEV]\n"
				"       kverbs latehello|latedereg DEV WAIT | killdestroy DEV LIMIT | uid DEV UID ERRNO\n");
		return 2;
	}
	printf("RESULT %s %d checks %d failures\n", t, checks, failures);
	return failures ? 1 : 0;
}
