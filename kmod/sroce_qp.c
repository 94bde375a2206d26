// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Queue pairs and shared receive queues of applications.
 *
 * The module sizes the rings exactly as sroced does on the socket path, so
 * the provider sees one layout on both paths; sroced owns the QP state
 * machine (IBA 10.3.1) and answers modify/query. Work requests never pass
 * through here: the provider writes them into the rings, and calls the
 * uverbs POST_* command with no work request only to wake a sleeping
 * sroced (the doorbell).
 */
#include <linux/slab.h>

#include "sroce.h"

struct sroce_qp_layout {
	u32 sq_size, sq_esz, rq_size, rq_esz;
	size_t sq_bytes, total;
};

static void sroce_qp_layout(const struct ib_qp_cap *cap, bool srq,
			    struct sroce_qp_layout *l)
{
	size_t eoff = sroce_ring_entries_offset();

	l->sq_size = roundup_pow_of_two(cap->max_send_wr);
	l->sq_esz = ALIGN(sizeof(struct sroce_send_wqe) +
			  max_t(size_t, cap->max_send_sge *
				sizeof(struct sroce_sge),
				cap->max_inline_data), 16);
	l->sq_bytes = ALIGN(eoff + (size_t)l->sq_size * l->sq_esz, 64);
	l->rq_size = srq ? 0 : roundup_pow_of_two(cap->max_recv_wr);
	l->rq_esz = srq ? 0 : ALIGN(sizeof(struct sroce_recv_wqe) +
				    cap->max_recv_sge *
				    sizeof(struct sroce_sge), 16);
	l->total = l->sq_bytes +
		   (srq ? 0 : eoff + (size_t)l->rq_size * l->rq_esz);
}

/* What sroced will grant, checked before anything is allocated. */
static int sroce_qp_cap(struct sroce_dev *sdev, struct ib_qp_cap *cap,
			bool srq)
{
	const struct sroce_device_attr *l = &sdev->limits;

	if (cap->max_send_wr > l->max_qp_wr || cap->max_send_sge > l->max_sge ||
	    cap->max_inline_data > l->max_inline_data)
		return -EINVAL;
	if (!srq && (cap->max_recv_wr > l->max_qp_wr ||
		     cap->max_recv_sge > l->max_sge))
		return -EINVAL;
	cap->max_send_wr = max(cap->max_send_wr, 1U);
	cap->max_send_sge = max(cap->max_send_sge, 1U);
	if (srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	} else {
		cap->max_recv_wr = max(cap->max_recv_wr, 1U);
		cap->max_recv_sge = max(cap->max_recv_sge, 1U);
	}
	return 0;
}

static void sroce_cap_to_abi(const struct ib_qp_cap *c, struct sroce_qp_cap *a)
{
	a->max_send_wr = c->max_send_wr;
	a->max_recv_wr = c->max_recv_wr;
	a->max_send_sge = c->max_send_sge;
	a->max_recv_sge = c->max_recv_sge;
	a->max_inline_data = c->max_inline_data;
}

static void sroce_cap_from_abi(const struct sroce_qp_cap *a, struct ib_qp_cap *c)
{
	c->max_send_wr = a->max_send_wr;
	c->max_recv_wr = a->max_recv_wr;
	c->max_send_sge = a->max_send_sge;
	c->max_recv_sge = a->max_recv_sge;
	c->max_inline_data = a->max_inline_data;
}

static int sroce_uqp_init(struct sroce_qp *qp, struct ib_qp_init_attr *init,
			  struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(qp->ibqp.device);
	struct sroce_srq *srq = init->srq ? to_ssrq(init->srq) : NULL;
	struct sroce_create_qp req = {};
	struct sroce_create_qp_resp resp;
	struct sroce_kqp_resp kresp = {};
	struct sroce_handle_req dreq;
	struct sroce_kqp_ext ext = {};
	struct sroce_qp_layout l;
	struct ib_qp_cap got;
	int err;

	if (udata->outlen < sizeof(kresp))
		return -EINVAL;
	err = sroce_qp_cap(sdev, &init->cap, srq);
	if (err)
		return err;
	sroce_qp_layout(&init->cap, srq, &l);
	qp->ring = sroce_ring_alloc(qp->uctx, l.total);
	if (IS_ERR(qp->ring))
		return PTR_ERR(qp->ring);
	sroce_ring_init(qp->ring->vaddr, l.sq_size, l.sq_esz);
	if (!srq)
		sroce_ring_init(qp->ring->vaddr + l.sq_bytes, l.rq_size,
				l.rq_esz);

	req.pd = to_spd(qp->ibqp.pd)->handle;
	req.send_cq = to_scq(init->send_cq)->handle;
	req.recv_cq = to_scq(init->recv_cq)->handle;
	req.srq = srq ? srq->handle : 0;
	req.qp_type = init->qp_type;	/* IB_QPT_RC/UC/UD == IBV_QPT_* */
	req.sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	req.user_handle = qp->id;
	sroce_cap_to_abi(&init->cap, &req.cap);
	sroce_ring_kmap(qp->ring, &ext.map);
	ext.sq_offset = 0;
	ext.rq_offset = srq ? ~0ULL : l.sq_bytes;
	ext.sq_size = l.sq_size;
	ext.sq_entry_size = l.sq_esz;
	ext.rq_size = l.rq_size;
	ext.rq_entry_size = l.rq_esz;
	err = sroce_ucall(qp->uctx, SROCE_OP_CREATE_QP, &req, sizeof(req),
			  &ext, sizeof(ext), &resp, sizeof(resp));
	if (err)
		goto err_ring;
	dreq.handle = resp.qpn;
	sroce_cap_from_abi(&resp.cap, &got);
	/* QPN 0 and 1 are the special QPs (IBA 10.2.1); the rings bound
	 * what sroced may grant.
	 */
	if (resp.qpn <= SROCE_GSI_QPN || resp.qpn > 0xffffff ||
	    got.max_send_wr > l.sq_size || got.max_recv_wr > l.rq_size) {
		err = -EPROTO;
		goto err_destroy;
	}
	qp->ibqp.qp_num = resp.qpn;
	qp->rq_offset = srq ? 0 : l.sq_bytes;
	init->cap = got;
	qp->cap = got;
	kresp.mmap_offset = rdma_user_mmap_get_offset(&qp->ring->rdma);
	kresp.ring_bytes = qp->ring->bytes;
	kresp.sq_offset = 0;
	kresp.rq_offset = ext.rq_offset;
	err = ib_copy_to_udata(udata, &kresp, sizeof(kresp));
	if (!err)
		return 0;
err_destroy:
	sroce_ucall(qp->uctx, SROCE_OP_DESTROY_QP, &dreq, sizeof(dreq), NULL,
		    0, NULL, 0);
err_ring:
	sroce_ring_free(qp->uctx, qp->ring);
	return err;
}

int sroce_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(ibqp->device);
	struct sroce_qp *qp = to_sqp(ibqp);
	int err;

	if (init->create_flags & ~IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK)
		return -EOPNOTSUPP;
	qp->sq_sig_type = init->sq_sig_type;
	if (!udata) {
		/* Kernel ULPs other than the MAD layer are not served. */
		if (init->qp_type != IB_QPT_GSI)
			return -EOPNOTSUPP;
		err = sroce_gsi_create(qp, init);
		if (!err)
			sroce_live_inc(SROCE_OBJ_QP);
		return err;
	}
	if (init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UC &&
	    init->qp_type != IB_QPT_UD)
		return -EOPNOTSUPP;
	qp->uctx = sroce_uctx(udata);
	err = xa_alloc(&sdev->qps, &qp->id, NULL, xa_limit_31b, GFP_KERNEL);
	if (err)
		return err;
	err = sroce_uqp_init(qp, init, udata);
	if (err) {
		xa_erase(&sdev->qps, qp->id);
		return err;
	}
	xa_store(&sdev->qps, qp->id, qp, GFP_KERNEL);
	sroce_live_inc(SROCE_OBJ_QP);
	return 0;
}

/* Device fatal: both rings of the QP say so (xa_lock of sdev->qps held). */
void sroce_qp_set_error(struct sroce_qp *qp)
{
	sroce_ring_set_error(qp->ring, 0);
	if (qp->rq_offset)
		sroce_ring_set_error(qp->ring, qp->rq_offset);
}

int sroce_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata)
{
	struct sroce_qp *qp = to_sqp(ibqp);
	struct sroce_modify_qp req = { .qpn = ibqp->qp_num, .attr_mask = mask };
	struct sroce_qp_attr *a = &req.attr;

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;
	if (!qp->uctx)
		return sroce_gsi_modify(qp, attr, mask);
	/* enum ib_qp_state, ib_mtu, access flags and the mask bits have the
	 * values of their ibv_ twins (uverbs passes them through).
	 */
	a->qp_state = attr->qp_state;
	a->cur_qp_state = attr->cur_qp_state;
	a->path_mtu = attr->path_mtu;
	a->qkey = attr->qkey;
	a->rq_psn = attr->rq_psn;
	a->sq_psn = attr->sq_psn;
	a->dest_qp_num = attr->dest_qp_num;
	a->qp_access_flags = attr->qp_access_flags;
	sroce_cap_to_abi(&attr->cap, &a->cap);
	if (mask & IB_QP_AV)
		sroce_ah_to_abi(&attr->ah_attr, &a->ah_attr);
	a->pkey_index = attr->pkey_index;
	a->en_sqd_async_notify = attr->en_sqd_async_notify;
	a->sq_draining = attr->sq_draining;
	a->max_rd_atomic = attr->max_rd_atomic;
	a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	a->min_rnr_timer = attr->min_rnr_timer;
	a->port_num = attr->port_num;
	a->timeout = attr->timeout;
	a->retry_cnt = attr->retry_cnt;
	a->rnr_retry = attr->rnr_retry;
	return sroce_ucall(qp->uctx, SROCE_OP_MODIFY_QP, &req, sizeof(req),
			   NULL, 0, NULL, 0);
}

int sroce_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init)
{
	struct sroce_qp *qp = to_sqp(ibqp);
	struct sroce_handle_req req = { .handle = ibqp->qp_num };
	struct sroce_qp_attr a;
	union ib_gid dgid;
	int err;

	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	if (!qp->uctx)
		return sroce_gsi_query(qp, attr);
	err = sroce_ucall(qp->uctx, SROCE_OP_QUERY_QP, &req, sizeof(req), NULL,
			  0, &a, sizeof(a));
	if (err)
		return err;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = a.qp_state;
	attr->cur_qp_state = a.cur_qp_state;
	attr->path_mtu = a.path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = a.qkey;
	attr->rq_psn = a.rq_psn;
	attr->sq_psn = a.sq_psn;
	attr->dest_qp_num = a.dest_qp_num;
	attr->qp_access_flags = a.qp_access_flags;
	attr->cap = qp->cap;
	attr->ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	memcpy(dgid.raw, a.ah_attr.dgid, sizeof(dgid.raw));
	rdma_ah_set_grh(&attr->ah_attr, &dgid, a.ah_attr.flow_label,
			a.ah_attr.sgid_index, a.ah_attr.hop_limit,
			a.ah_attr.traffic_class);
	rdma_ah_set_sl(&attr->ah_attr, a.ah_attr.sl);
	rdma_ah_set_port_num(&attr->ah_attr, SROCE_PORT);
	attr->pkey_index = a.pkey_index;
	attr->en_sqd_async_notify = a.en_sqd_async_notify;
	attr->sq_draining = a.sq_draining;
	attr->max_rd_atomic = a.max_rd_atomic;
	attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	attr->min_rnr_timer = a.min_rnr_timer;
	attr->port_num = SROCE_PORT;
	attr->timeout = a.timeout;
	attr->retry_cnt = a.retry_cnt;
	attr->rnr_retry = a.rnr_retry;
	return 0;
}

int sroce_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct sroce_qp *qp = to_sqp(ibqp);
	struct sroce_handle_req req = { .handle = ibqp->qp_num };
	struct sroce_destroy_qp_resp resp;

	if (!qp->uctx) {
		sroce_gsi_destroy(qp);
	} else {
		xa_erase(&to_sdev(ibqp->device)->qps, qp->id);
		sroce_ucall(qp->uctx, SROCE_OP_DESTROY_QP, &req, sizeof(req),
			    NULL, 0, &resp, sizeof(resp));
		sroce_ring_free(qp->uctx, qp->ring);
	}
	sroce_live_dec(SROCE_OBJ_QP);
	return 0;
}

/* User QPs: a post without work requests is the provider's doorbell. */
int sroce_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad)
{
	struct sroce_qp *qp = to_sqp(ibqp);

	if (!qp->uctx)
		return sroce_gsi_post_send(qp, wr, bad);
	if (wr) {
		*bad = wr;
		return -EINVAL;
	}
	sroce_chan_doorbell(qp->uctx->chan);
	return 0;
}

int sroce_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad)
{
	struct sroce_qp *qp = to_sqp(ibqp);

	if (!qp->uctx)
		return sroce_gsi_post_recv(qp, wr, bad);
	if (wr) {
		*bad = wr;
		return -EINVAL;
	}
	sroce_chan_doorbell(qp->uctx->chan);
	return 0;
}
