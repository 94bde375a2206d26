// SPDX-License-Identifier: MIT
/*
 * kmock's loopback "engine": work requests out of the send rings of QPs in
 * RTS, a SEND into the receive queue (or SRQ) of the same QP, an RDMA WRITE
 * into the MR its rkey names, completions into the CQ rings with the
 * ring's memory order (sroce_abi.h), and COMP_EVENT for armed CQs.
 */
#include <errno.h>
#include <string.h>

#include "kmock.h"

static uint32_t load_acq(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store_rel(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Completion into a CQ ring, then the event if the CQ is armed (what
 * sroced does for channel == SROCE_KCHANNEL). */
static void complete(int dev, uint32_t ctx, uint32_t cq_handle,
		     const struct sroce_cqe *cqe)
{
	struct obj *cq = find(K_CQ, dev, ctx, cq_handle);
	struct sroce_ring *h;
	uint32_t prod, armed;

	if (!cq)
		return;
	h = cq->cq.hdr;
	prod = h->prod;
	if (prod - load_acq(&h->cons) >= h->size)
		return; /* full: a real daemon keeps it in the engine */
	memcpy(cq->cq.entries + (size_t)(prod & (h->size - 1)) * h->entry_size,
	       cqe, sizeof(*cqe));
	store_rel(&h->prod, prod + 1);
	st.cqes++;
	armed = load_acq(&h->armed);
	if (armed && __atomic_compare_exchange_n(&h->armed, &armed, 0, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
		struct sroce_comp_event_desc ev = {
			.cq_handle = cq->user_handle,
		};

		if (send_msg(dev, SROCE_KMSG_COMP_EVENT, 0, &ev, sizeof(ev),
			     NULL, 0) == 0)
			st.events++;
	}
}

/* The MR bytes [addr, addr + len) through our mapping, or NULL. */
static uint8_t *mr_bytes(struct obj *mr, uint64_t addr, uint32_t len,
			 bool write)
{
	if (!mr || addr < mr->addr || addr + len > mr->addr + mr->length ||
	    (write && !mr->writable))
		return NULL;
	return mr->map.base + mr->first_byte + (addr - mr->addr);
}

static struct obj *mr_by_key(int dev, uint32_t ctx, uint32_t key, bool rkey)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == K_MR && objs[i].dev == dev &&
		    (rkey ? objs[i].rkey == key :
			    objs[i].ctx == ctx && objs[i].handle == key))
			return &objs[i];
	return NULL;
}

/* Copies the gather list of a send WQE into buf; -1 on a bad SGE. */
static int gather(struct obj *qp, const struct sroce_send_wqe *w,
		  const struct sroce_sge *sge, uint8_t *buf, size_t cap)
{
	size_t n = 0;

	if (w->send_flags & IBV_SEND_INLINE) {
		if (w->inline_len > cap)
			return -1;
		memcpy(buf, sge, w->inline_len);
		return (int)w->inline_len;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		uint8_t *p = mr_bytes(mr_by_key(qp->dev, qp->ctx, sge[i].lkey,
						false),
				      sge[i].addr, sge[i].length, false);

		if (!p || n + sge[i].length > cap)
			return -1;
		memcpy(buf + n, p, sge[i].length);
		n += sge[i].length;
	}
	return (int)n;
}

/* One send WQE of a loopback QP; false leaves it for the next pass. */
static bool execute(struct obj *qp, const uint8_t *slot)
{
	const struct sroce_send_wqe *w = (const void *)slot;
	const struct sroce_sge *sge = (const void *)(w + 1);
	struct sroce_cqe sc = { .wr_id = w->wr_id, .qp_num = qp->handle };
	static uint8_t data[1 << 20];
	int len = gather(qp, w, sge, data, sizeof(data));

	sc.status = len < 0 ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS;
	if (len >= 0 && w->opcode == IBV_WR_RDMA_WRITE) {
		uint8_t *dst = mr_bytes(mr_by_key(qp->dev, 0, w->rkey, true),
					w->remote_addr, (uint32_t)len, true);

		if (dst)
			memcpy(dst, data, (size_t)len);
		else
			sc.status = IBV_WC_REM_ACCESS_ERR;
		sc.opcode = IBV_WC_RDMA_WRITE;
	} else if (len >= 0 && w->opcode == IBV_WR_SEND) {
		struct ring *rq = &qp->rq;
		struct obj *srq = NULL;
		struct sroce_cqe rc = { .qp_num = qp->handle,
					.src_qp = qp->handle };
		const struct sroce_recv_wqe *r;
		const struct sroce_sge *rs;
		size_t off = 0;

		if (qp->srq) {
			srq = find(K_SRQ, qp->dev, qp->ctx, qp->srq);
			if (!srq)
				return true;
			rq = &srq->srqr;
		}
		if (rq->cons == load_acq(&rq->hdr->prod))
			return false; /* no receive posted yet: retry later */
		r = (const void *)(rq->entries +
				   (size_t)(rq->cons & (rq->hdr->size - 1)) *
					   rq->hdr->entry_size);
		rs = (const void *)(r + 1);
		rc.wr_id = r->wr_id;
		rc.opcode = IBV_WC_RECV;
		rc.status = IBV_WC_SUCCESS;
		for (uint32_t i = 0; i < r->num_sge && off < (size_t)len; i++) {
			size_t n = rs[i].length;
			uint8_t *dst;

			if (n > (size_t)len - off)
				n = (size_t)len - off;
			dst = mr_bytes(mr_by_key(qp->dev, qp->ctx, rs[i].lkey,
						 false),
				       rs[i].addr, (uint32_t)n, true);
			if (!dst) {
				rc.status = IBV_WC_LOC_PROT_ERR;
				break;
			}
			memcpy(dst, data + off, n);
			off += n;
		}
		if (off < (size_t)len && rc.status == IBV_WC_SUCCESS)
			rc.status = IBV_WC_LOC_LEN_ERR;
		rc.byte_len = (uint32_t)off;
		rq->cons++;
		store_rel(&rq->hdr->cons, rq->cons);
		complete(qp->dev, qp->ctx, qp->recv_cq, &rc);
		sc.opcode = IBV_WC_SEND;
	} else if (len >= 0) {
		sc.status = IBV_WC_LOC_QP_OP_ERR;
	}
	if (qp->sig_all || (w->send_flags & IBV_SEND_SIGNALED) ||
	    sc.status != IBV_WC_SUCCESS)
		complete(qp->dev, qp->ctx, qp->send_cq, &sc);
	return true;
}

void run_engine(void)
{
	for (int i = 0; i < MAX_OBJS; i++) {
		struct obj *qp = &objs[i];
		struct ring *sq = &qp->sq;

		if (qp->kind != K_QP || qp->state != IBV_QPS_RTS)
			continue;
		while (sq->cons != load_acq(&sq->hdr->prod)) {
			const uint8_t *slot =
				sq->entries +
				(size_t)(sq->cons & (sq->hdr->size - 1)) *
					sq->hdr->entry_size;

			if (!execute(qp, slot))
				break;
			sq->cons++;
			store_rel(&sq->hdr->cons, sq->cons);
		}
	}
}
