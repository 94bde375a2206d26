// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Completion queues, and the events sroced sends back.
 *
 * A user CQ is a ring the provider polls without entering the kernel;
 * ibv_req_notify_cq stores 1 (next) or 2 (solicited) in its `armed` word
 * (IBA 11.4.2.2). sroced clears it when a qualifying completion lands and
 * sends COMP_EVENT, which runs the CQ's completion handler here: that is
 * how ibv_get_cq_event sleeps in the kernel's own completion channel.
 *
 * A kernel CQ (ib_mad's, for QP1) keeps ib_wc entries in kernel memory.
 */
#include <linux/slab.h>

#include "sroce.h"

static int sroce_kcq_init(struct sroce_cq *cq, int cqe)
{
	u32 size = roundup_pow_of_two(cqe);

	if (size > SROCE_KCQ_MAX)
		return -EINVAL;
	cq->k.wc = kcalloc(size, sizeof(*cq->k.wc), GFP_KERNEL);
	if (!cq->k.wc)
		return -ENOMEM;
	spin_lock_init(&cq->k.lock);
	cq->k.size = size;
	cq->ibcq.cqe = size;
	return 0;
}

static int sroce_ucq_init(struct sroce_cq *cq, int cqe, struct ib_udata *udata)
{
	struct sroce_create_cq req = { .cqe = cqe, .channel = SROCE_KCHANNEL };
	struct sroce_kring_resp kresp = {};
	struct sroce_kring_ext ext = {};
	struct sroce_create_cq_resp resp;
	struct sroce_handle_req dreq;
	u32 size = roundup_pow_of_two(cqe);
	u32 esz = ALIGN(sizeof(struct sroce_cqe), 16);
	int err;

	cq->uctx = sroce_uctx(udata);
	if (udata->outlen < sizeof(kresp))
		return -EINVAL;
	cq->ring = sroce_ring_alloc(cq->uctx, sroce_ring_entries_offset() +
				    (size_t)size * esz);
	if (IS_ERR(cq->ring))
		return PTR_ERR(cq->ring);
	sroce_ring_init(cq->ring->vaddr, size, esz);
	sroce_ring_kmap(cq->ring, &ext.map);
	ext.size = size;
	ext.entry_size = esz;
	req.user_handle = cq->id;
	err = sroce_ucall(cq->uctx, SROCE_OP_CREATE_CQ, &req, sizeof(req), &ext,
			  sizeof(ext), &resp, sizeof(resp));
	if (err)
		goto err_ring;
	cq->handle = resp.handle;
	cq->ibcq.cqe = size;
	kresp.mmap_offset = rdma_user_mmap_get_offset(&cq->ring->rdma);
	kresp.ring_bytes = cq->ring->bytes;
	err = ib_copy_to_udata(udata, &kresp, sizeof(kresp));
	if (!err)
		return 0;
	dreq.handle = cq->handle;
	sroce_ucall(cq->uctx, SROCE_OP_DESTROY_CQ, &dreq, sizeof(dreq), NULL, 0,
		    NULL, 0);
err_ring:
	sroce_ring_free(cq->uctx, cq->ring);
	return err;
}

int sroce_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(ibcq->device);
	struct sroce_cq *cq = to_scq(ibcq);
	int err;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > sdev->limits.max_cqe)
		return -EINVAL;
	/* Reserve the id: events find the CQ only once it is complete. */
	err = xa_alloc(&sdev->cqs, &cq->id, NULL, xa_limit_31b, GFP_KERNEL);
	if (err)
		return err;
	err = udata ? sroce_ucq_init(cq, attr->cqe, udata) :
		      sroce_kcq_init(cq, attr->cqe);
	if (err) {
		xa_erase(&sdev->cqs, cq->id);
		return err;
	}
	xa_store(&sdev->cqs, cq->id, cq, GFP_KERNEL);
	sroce_live_inc(SROCE_OBJ_CQ);
	return 0;
}

/*
 * ibv_resize_cq (IBA 11.2.6.3): a new ring of at least cqe entries; sroced
 * moves the completions not yet polled into it, in order, and answers
 * EINVAL when cqe is below their count (as rxe). The provider holds its
 * poll lock throughout and maps the new ring from the driver data; the old
 * one is released here (a side that still maps it keeps valid memory).
 * Kernel CQs (ib_mad's) are never resized.
 */
int sroce_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(ibcq->device);
	struct sroce_cq *cq = to_scq(ibcq);
	struct sroce_resize_cq req = { .handle = cq->handle, .cqe = cqe };
	struct sroce_kring_resp kresp = {};
	struct sroce_kring_ext ext = {};
	struct sroce_create_cq_resp resp;
	u32 esz = ALIGN(sizeof(struct sroce_cqe), 16);
	struct sroce_rbuf *ring, *old;
	u32 size;
	int err;

	if (!cq->uctx || !udata)
		return -EOPNOTSUPP;
	if (cqe < 1 || cqe > sdev->limits.max_cqe)
		return -EINVAL;
	if (udata->outlen < sizeof(kresp))
		return -EINVAL;
	size = roundup_pow_of_two(cqe);
	ring = sroce_ring_alloc(cq->uctx, sroce_ring_entries_offset() +
				(size_t)size * esz);
	if (IS_ERR(ring))
		return PTR_ERR(ring);
	sroce_ring_init(ring->vaddr, size, esz);
	sroce_ring_kmap(ring, &ext.map);
	ext.size = size;
	ext.entry_size = esz;
	err = sroce_ucall(cq->uctx, SROCE_OP_RESIZE_CQ, &req, sizeof(req), &ext,
			  sizeof(ext), &resp, sizeof(resp));
	if (err)
		goto err_ring;
	kresp.mmap_offset = rdma_user_mmap_get_offset(&ring->rdma);
	kresp.ring_bytes = ring->bytes;
	/* sroced fills the new ring from now on: it is the CQ's, come what may */
	xa_lock(&sdev->cqs);	/* sroce_daemon_gone reads cq->ring under it */
	old = cq->ring;
	cq->ring = ring;
	xa_unlock(&sdev->cqs);
	cq->ibcq.cqe = size;
	sroce_ring_free(cq->uctx, old);
	return ib_copy_to_udata(udata, &kresp, sizeof(kresp));

err_ring:
	sroce_ring_free(cq->uctx, ring);
	return err;
}

int sroce_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct sroce_cq *cq = to_scq(ibcq);
	struct sroce_handle_req req = { .handle = cq->handle };

	/* After this no event can reach the CQ (events run under xa_lock). */
	xa_erase(&to_sdev(ibcq->device)->cqs, cq->id);
	if (cq->uctx) {
		sroce_ucall(cq->uctx, SROCE_OP_DESTROY_CQ, &req, sizeof(req),
			    NULL, 0, NULL, 0);
		sroce_ring_free(cq->uctx, cq->ring);
	} else {
		kfree(cq->k.wc);
	}
	sroce_live_dec(SROCE_OBJ_CQ);
	return 0;
}

/* Adds a completion to a kernel CQ; fires the handler as armed. */
void sroce_kcq_push(struct sroce_cq *cq, const struct ib_wc *wc,
		    bool solicited)
{
	struct sroce_kcq *k = &cq->k;
	unsigned long flags;
	bool fire = false;

	spin_lock_irqsave(&k->lock, flags);
	if (k->count == k->size) {
		spin_unlock_irqrestore(&k->lock, flags);
		/* IBA 11.4.2.1: a CQ overrun is a CQ error. */
		if (cq->ibcq.event_handler) {
			struct ib_event ev = {
				.device = cq->ibcq.device,
				.element.cq = &cq->ibcq,
				.event = IB_EVENT_CQ_ERR,
			};

			cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
		}
		return;
	}
	k->wc[(k->head + k->count) & (k->size - 1)] = *wc;
	k->count++;
	if (k->notify == IB_CQ_NEXT_COMP ||
	    (k->notify == IB_CQ_SOLICITED &&
	     (solicited || wc->status != IB_WC_SUCCESS))) {
		k->notify = 0;
		fire = true;
	}
	spin_unlock_irqrestore(&k->lock, flags);
	if (fire && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

int sroce_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	struct sroce_cq *cq = to_scq(ibcq);
	struct sroce_kcq *k = &cq->k;
	unsigned long flags;
	int i;

	/* User CQs are polled in user space, from the ring. */
	if (cq->uctx)
		return -EOPNOTSUPP;
	spin_lock_irqsave(&k->lock, flags);
	for (i = 0; i < n && k->count; i++) {
		wc[i] = k->wc[k->head];
		k->head = (k->head + 1) & (k->size - 1);
		k->count--;
	}
	spin_unlock_irqrestore(&k->lock, flags);
	return i;
}

int sroce_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct sroce_cq *cq = to_scq(ibcq);
	u32 how = flags & IB_CQ_SOLICITED_MASK;
	struct sroce_ring *hdr;
	unsigned long irqf;
	int ret = 0;

	if (cq->uctx) {
		/* the uverbs REQ_NOTIFY_CQ command: same as the provider's */
		hdr = cq->ring->vaddr;
		/* release: pairs with sroced's acquire of `armed` */
		smp_store_release(&hdr->armed,
				  how == IB_CQ_SOLICITED ? 2U : 1U);
		return 0;
	}
	spin_lock_irqsave(&cq->k.lock, irqf);
	cq->k.notify = how;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->k.count)
		ret = 1;
	spin_unlock_irqrestore(&cq->k.lock, irqf);
	return ret;
}

/* COMP_EVENT: cq_handle is the id the module gave as user_handle. */
int sroce_comp_event(struct sroce_dev *sdev, struct sroce_chan *chan,
		     const struct sroce_comp_event_desc *ev)
{
	struct sroce_cq *cq;
	int err = -ENOENT;

	if (ev->cq_handle > U32_MAX)
		return -EINVAL;
	xa_lock(&sdev->cqs);
	cq = xa_load(&sdev->cqs, ev->cq_handle);
	if (cq && cq->uctx && cq->uctx->chan == chan) {
		if (cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		err = 0;
	}
	xa_unlock(&sdev->cqs);
	return err;
}

static int sroce_event_kind(u32 type)
{
	switch (type) {
	case IB_EVENT_CQ_ERR:
		return SROCE_OBJ_CQ;
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_COMM_EST:
	case IB_EVENT_SQ_DRAINED:
	case IB_EVENT_PATH_MIG:
	case IB_EVENT_PATH_MIG_ERR:
	case IB_EVENT_QP_LAST_WQE_REACHED:
		return SROCE_OBJ_QP;
	case IB_EVENT_SRQ_ERR:
	case IB_EVENT_SRQ_LIMIT_REACHED:
		return SROCE_OBJ_SRQ;
	default:
		/* port and device events are the module's own */
		return -EINVAL;
	}
}

/* ASYNC_EVENT: element is the id of the CQ, QP or SRQ (IBA 11.6.3.1). */
int sroce_async_event(struct sroce_dev *sdev, struct sroce_chan *chan,
		      const struct sroce_async_event_desc *ev)
{
	int kind = sroce_event_kind(ev->event_type);
	struct ib_event ie = { .device = &sdev->ib, .event = ev->event_type };
	struct sroce_srq *srq;
	struct sroce_qp *qp;
	struct sroce_cq *cq;
	int err = -ENOENT;

	if (kind < 0)
		return kind;
	if (ev->element > U32_MAX)
		return -EINVAL;
	if (kind == SROCE_OBJ_CQ) {
		xa_lock(&sdev->cqs);
		cq = xa_load(&sdev->cqs, ev->element);
		if (cq && cq->uctx && cq->uctx->chan == chan) {
			ie.element.cq = &cq->ibcq;
			if (cq->ibcq.event_handler)
				cq->ibcq.event_handler(&ie, cq->ibcq.cq_context);
			err = 0;
		}
		xa_unlock(&sdev->cqs);
	} else if (kind == SROCE_OBJ_QP) {
		xa_lock(&sdev->qps);
		qp = xa_load(&sdev->qps, ev->element);
		if (qp && qp->uctx && qp->uctx->chan == chan) {
			ie.element.qp = &qp->ibqp;
			if (qp->ibqp.event_handler)
				qp->ibqp.event_handler(&ie,
						       qp->ibqp.qp_context);
			err = 0;
		}
		xa_unlock(&sdev->qps);
	} else {
		xa_lock(&sdev->srqs);
		srq = xa_load(&sdev->srqs, ev->element);
		if (srq && srq->uctx && srq->uctx->chan == chan) {
			ie.element.srq = &srq->ibsrq;
			if (srq->ibsrq.event_handler)
				srq->ibsrq.event_handler(&ie,
							 srq->ibsrq.srq_context);
			err = 0;
		}
		xa_unlock(&sdev->srqs);
	}
	return err;
}

/*
 * sroced is gone: nothing its contexts posted will complete. As a dead HCA
 * does (IBA 11.6.2 catastrophic error): every ring says so (the provider
 * then flushes outstanding work itself), every CQ's handler runs so that
 * sleepers in ibv_get_cq_event wake up, and DEVICE_FATAL is reported.
 */
void sroce_daemon_gone(struct sroce_dev *sdev, struct sroce_chan *chan)
{
	struct ib_event ev = {
		.device = &sdev->ib,
		.element.port_num = SROCE_PORT,
		.event = IB_EVENT_DEVICE_FATAL,
	};
	struct sroce_srq *srq;
	struct sroce_qp *qp;
	struct sroce_cq *cq;
	unsigned long i;
	bool any = false;

	xa_lock(&sdev->qps);
	xa_for_each(&sdev->qps, i, qp) {
		if (!qp->uctx || qp->uctx->chan != chan)
			continue;
		sroce_qp_set_error(qp);
		any = true;
	}
	xa_unlock(&sdev->qps);
	xa_lock(&sdev->srqs);
	xa_for_each(&sdev->srqs, i, srq) {
		if (!srq->uctx || srq->uctx->chan != chan)
			continue;
		sroce_ring_set_error(srq->ring, 0);
		any = true;
	}
	xa_unlock(&sdev->srqs);
	xa_lock(&sdev->cqs);
	xa_for_each(&sdev->cqs, i, cq) {
		if (!cq->uctx || cq->uctx->chan != chan)
			continue;
		sroce_ring_set_error(cq->ring, 0);
		if (cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		any = true;
	}
	xa_unlock(&sdev->cqs);
	sroce_port_update(sdev);
	if (any || !xa_empty(&sdev->ctxs)) {
		ib_dispatch_event(&ev);
		/* programs still hold the device: reset it (sroce_main.c) */
		sroce_dev_reset(sdev);
	}
}
