// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Shared receive queues of applications (IBA 10.2.9): a ring like a QP's
 * receive queue; sroced owns the limit event (IBA 11.6.3.3).
 */
#include "sroce.h"

static int sroce_usrq_init(struct sroce_srq *srq, struct ib_srq_init_attr *init,
			   struct ib_udata *udata)
{
	struct ib_srq_attr *attr = &init->attr;
	struct sroce_create_srq req = {
		.pd = to_spd(srq->ibsrq.pd)->handle,
		.max_wr = attr->max_wr,
		.max_sge = attr->max_sge,
		.srq_limit = attr->srq_limit,
		.user_handle = srq->id,
	};
	struct sroce_create_srq_resp resp;
	struct sroce_kring_resp kresp = {};
	struct sroce_kring_ext ext = {};
	struct sroce_handle_req dreq;
	u32 size = roundup_pow_of_two(attr->max_wr);
	u32 esz = ALIGN(sizeof(struct sroce_recv_wqe) +
			attr->max_sge * sizeof(struct sroce_sge), 16);
	int err;

	if (udata->outlen < sizeof(kresp))
		return -EINVAL;
	srq->ring = sroce_ring_alloc(srq->uctx, sroce_ring_entries_offset() +
				     (size_t)size * esz);
	if (IS_ERR(srq->ring))
		return PTR_ERR(srq->ring);
	sroce_ring_init(srq->ring->vaddr, size, esz);
	sroce_ring_kmap(srq->ring, &ext.map);
	ext.size = size;
	ext.entry_size = esz;
	err = sroce_ucall(srq->uctx, SROCE_OP_CREATE_SRQ, &req, sizeof(req),
			  &ext, sizeof(ext), &resp, sizeof(resp));
	if (err)
		goto err_ring;
	srq->handle = resp.handle;
	dreq.handle = resp.handle;
	if (resp.max_wr > size) {
		err = -EPROTO;
		goto err_destroy;
	}
	attr->max_wr = resp.max_wr;
	attr->max_sge = resp.max_sge;
	kresp.mmap_offset = rdma_user_mmap_get_offset(&srq->ring->rdma);
	kresp.ring_bytes = srq->ring->bytes;
	err = ib_copy_to_udata(udata, &kresp, sizeof(kresp));
	if (!err)
		return 0;
err_destroy:
	sroce_ucall(srq->uctx, SROCE_OP_DESTROY_SRQ, &dreq, sizeof(dreq), NULL,
		    0, NULL, 0);
err_ring:
	sroce_ring_free(srq->uctx, srq->ring);
	return err;
}

int sroce_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(ibsrq->device);
	const struct sroce_device_attr *l = &sdev->limits;
	struct sroce_srq *srq = to_ssrq(ibsrq);
	int err;

	if (!udata || init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!init->attr.max_wr || init->attr.max_wr > l->max_srq_wr ||
	    !init->attr.max_sge || init->attr.max_sge > l->max_srq_sge ||
	    init->attr.srq_limit > init->attr.max_wr)
		return -EINVAL;
	srq->uctx = sroce_uctx(udata);
	err = xa_alloc(&sdev->srqs, &srq->id, NULL, xa_limit_31b, GFP_KERNEL);
	if (err)
		return err;
	err = sroce_usrq_init(srq, init, udata);
	if (err) {
		xa_erase(&sdev->srqs, srq->id);
		return err;
	}
	xa_store(&sdev->srqs, srq->id, srq, GFP_KERNEL);
	sroce_live_inc(SROCE_OBJ_SRQ);
	return 0;
}

int sroce_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct sroce_srq *srq = to_ssrq(ibsrq);
	struct sroce_modify_srq req = {
		.handle = srq->handle,
		.attr_mask = mask,	/* IB_SRQ_* == IBV_SRQ_* */
		.max_wr = attr->max_wr,
		.srq_limit = attr->srq_limit,
	};

	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	return sroce_ucall(srq->uctx, SROCE_OP_MODIFY_SRQ, &req, sizeof(req),
			   NULL, 0, NULL, 0);
}

int sroce_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct sroce_srq *srq = to_ssrq(ibsrq);
	struct sroce_handle_req req = { .handle = srq->handle };
	struct sroce_srq_attr a;
	int err;

	err = sroce_ucall(srq->uctx, SROCE_OP_QUERY_SRQ, &req, sizeof(req),
			  NULL, 0, &a, sizeof(a));
	if (err)
		return err;
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

int sroce_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct sroce_srq *srq = to_ssrq(ibsrq);
	struct sroce_handle_req req = { .handle = srq->handle };

	xa_erase(&to_sdev(ibsrq->device)->srqs, srq->id);
	sroce_ucall(srq->uctx, SROCE_OP_DESTROY_SRQ, &req, sizeof(req), NULL, 0,
		    NULL, 0);
	sroce_ring_free(srq->uctx, srq->ring);
	sroce_live_dec(SROCE_OBJ_SRQ);
	return 0;
}

int sroce_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad)
{
	struct sroce_srq *srq = to_ssrq(ibsrq);

	if (wr) {
		*bad = wr;
		return -EINVAL;
	}
	sroce_chan_doorbell(srq->uctx->chan);
	return 0;
}
