// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The GSI QP (QP1, IBA 13.5.1) of ib_mad, which ib_cm and rdma_cm use.
 *
 * It lives in the kernel, with kernel CQs; its MADs travel through sroced,
 * which carries them as RoCEv2 UD datagrams (Annex A17): GSI_SEND for each
 * posted send, GSI_RECV for each MAD that arrives for QP1. Without sroced a
 * send still completes (UD gives no delivery guarantee) and is counted as
 * dropped, so the MAD layer times out as it would on a dead fabric.
 */
#include <linux/ip.h>
#include <linux/slab.h>
#include <net/ipv6.h>

#include "sroce.h"

int sroce_gsi_create(struct sroce_qp *qp, struct ib_qp_init_attr *init)
{
	struct sroce_dev *sdev = to_sdev(qp->ibqp.device);
	unsigned long flags;
	int err = 0;

	if (init->port_num != SROCE_PORT || init->srq ||
	    init->cap.max_send_wr > SROCE_GSI_MAX_WR ||
	    init->cap.max_recv_wr > SROCE_GSI_MAX_WR ||
	    init->cap.max_send_sge > SROCE_GSI_MAX_SGE ||
	    init->cap.max_recv_sge > SROCE_GSI_MAX_SGE)
		return -EINVAL;
	spin_lock_init(&qp->lock);
	INIT_LIST_HEAD(&qp->recvs);
	qp->state = IB_QPS_RESET;
	qp->cap = init->cap;
	qp->cap.max_inline_data = 0;
	qp->ibqp.qp_num = SROCE_GSI_QPN;
	spin_lock_irqsave(&sdev->chan_lock, flags);
	if (sdev->gsi)
		err = -EBUSY;
	else
		sdev->gsi = qp;
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	return err;
}

static void sroce_gsi_take_recvs(struct sroce_qp *qp, struct list_head *out)
{
	list_splice_init(&qp->recvs, out);
	qp->nrecv = 0;
}

/* IBA 10.3.1: work requests of a QP in the error state complete flushed. */
static void sroce_gsi_flush(struct sroce_qp *qp, struct list_head *recvs)
{
	struct sroce_gsi_recv *r, *tmp;
	struct ib_wc wc;

	list_for_each_entry_safe(r, tmp, recvs, node) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = r->wr_id;
		wc.status = IB_WC_WR_FLUSH_ERR;
		wc.opcode = IB_WC_RECV;
		wc.qp = &qp->ibqp;
		sroce_kcq_push(to_scq(qp->ibqp.recv_cq), &wc, false);
		list_del(&r->node);
		kfree(r);
	}
}

void sroce_gsi_destroy(struct sroce_qp *qp)
{
	struct sroce_dev *sdev = to_sdev(qp->ibqp.device);
	struct sroce_gsi_recv *r, *tmp;
	unsigned long flags;
	LIST_HEAD(recvs);

	spin_lock_irqsave(&sdev->chan_lock, flags);
	if (sdev->gsi == qp)
		sdev->gsi = NULL;
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	spin_lock_irqsave(&qp->lock, flags);
	sroce_gsi_take_recvs(qp, &recvs);
	spin_unlock_irqrestore(&qp->lock, flags);
	list_for_each_entry_safe(r, tmp, &recvs, node)
		kfree(r);
}

int sroce_gsi_modify(struct sroce_qp *qp, struct ib_qp_attr *attr, int mask)
{
	enum ib_qp_state cur, next;
	unsigned long flags;
	LIST_HEAD(recvs);

	spin_lock_irqsave(&qp->lock, flags);
	cur = mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	next = mask & IB_QP_STATE ? attr->qp_state : cur;
	/* check everything (IBA 11.2.4.2), then apply */
	if (cur != qp->state ||
	    !ib_modify_qp_is_ok(cur, next, IB_QPT_GSI, mask) ||
	    ((mask & IB_QP_PORT) && attr->port_num != SROCE_PORT) ||
	    ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index > 0)) {
		spin_unlock_irqrestore(&qp->lock, flags);
		return -EINVAL;
	}
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_PKEY_INDEX)
		qp->pkey_index = attr->pkey_index;
	if (mask & IB_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn;
	qp->state = next;
	if (next == IB_QPS_ERR || next == IB_QPS_RESET)
		sroce_gsi_take_recvs(qp, &recvs);
	spin_unlock_irqrestore(&qp->lock, flags);
	if (next == IB_QPS_ERR) {
		sroce_gsi_flush(qp, &recvs);
	} else {
		struct sroce_gsi_recv *r, *tmp;

		list_for_each_entry_safe(r, tmp, &recvs, node)
			kfree(r);
	}
	return 0;
}

int sroce_gsi_query(struct sroce_qp *qp, struct ib_qp_attr *attr)
{
	unsigned long flags;

	memset(attr, 0, sizeof(*attr));
	spin_lock_irqsave(&qp->lock, flags);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->qkey = qp->qkey;
	attr->sq_psn = qp->sq_psn;
	attr->pkey_index = qp->pkey_index;
	spin_unlock_irqrestore(&qp->lock, flags);
	attr->port_num = SROCE_PORT;
	attr->path_mtu = IB_MTU_256;
	attr->cap = qp->cap;
	return 0;
}

static int sroce_gsi_send_one(struct sroce_dev *sdev, struct sroce_qp *qp,
			      const struct ib_send_wr *wr)
{
	const struct ib_ud_wr *ud = ud_wr(wr);
	struct sroce_kgsi h = {};
	struct sroce_chan *chan;
	struct sroce_ah *ah;
	u8 mad[SROCE_KGSI_MAX_MAD];
	u32 len = 0;
	int i, err = -ENOTCONN;

	if (READ_ONCE(qp->state) != IB_QPS_RTS)
		return -EINVAL;
	if (wr->opcode != IB_WR_SEND || wr->num_sge > SROCE_GSI_MAX_SGE ||
	    !ud->ah)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		const struct ib_sge *sge = &wr->sg_list[i];

		if (sge->length > sizeof(mad) - len)
			return -EINVAL;
		/* no DMA device: addresses are kernel virtual addresses */
		memcpy(mad + len, (void *)(uintptr_t)sge->addr, sge->length);
		len += sge->length;
	}
	ah = to_sah(ud->ah);
	memcpy(h.sgid, ah->sgid, sizeof(h.sgid));
	memcpy(h.dgid, ah->attr.dgid, sizeof(h.dgid));
	h.remote_qpn = ud->remote_qpn;
	/* IBA 10.2.5: a Q_Key with the high bit set means the QP's own. */
	h.qkey = ud->remote_qkey & 0x80000000 ? READ_ONCE(qp->qkey) :
						 ud->remote_qkey;
	h.flow_label = ah->attr.flow_label;
	h.pkey = IB_DEFAULT_PKEY_FULL;
	h.traffic_class = ah->attr.traffic_class;
	h.hop_limit = ah->attr.hop_limit;
	h.len = len;
	chan = sroce_dev_chan(sdev);
	if (chan) {
		err = sroce_notify(chan, SROCE_KMSG_GSI_SEND, 0, &h, sizeof(h),
				   mad, len, GFP_ATOMIC);
		sroce_chan_put(chan);
	}
	atomic64_inc(err ? &sdev->gsi_drop : &sdev->gsi_tx);

	/* UD: the send is complete once handed on (IBA 9.7.7 unreliable). */
	if (qp->sq_sig_type == IB_SIGNAL_ALL_WR ||
	    (wr->send_flags & IB_SEND_SIGNALED)) {
		struct ib_wc wc = {
			.wr_id = wr->wr_id,
			.status = IB_WC_SUCCESS,
			.opcode = IB_WC_SEND,
			.qp = &qp->ibqp,
			.byte_len = len,
			.port_num = SROCE_PORT,
		};

		sroce_kcq_push(to_scq(qp->ibqp.send_cq), &wc, false);
	}
	return 0;
}

int sroce_gsi_post_send(struct sroce_qp *qp, const struct ib_send_wr *wr,
			const struct ib_send_wr **bad)
{
	struct sroce_dev *sdev = to_sdev(qp->ibqp.device);
	int err;

	for (; wr; wr = wr->next) {
		err = sroce_gsi_send_one(sdev, qp, wr);
		if (err) {
			*bad = wr;
			return err;
		}
	}
	return 0;
}

int sroce_gsi_post_recv(struct sroce_qp *qp, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad)
{
	struct sroce_gsi_recv *r;
	unsigned long flags;
	int err = 0;

	for (; wr; wr = wr->next) {
		if (wr->num_sge > SROCE_GSI_MAX_SGE) {
			err = -EINVAL;
			break;
		}
		r = kmalloc(sizeof(*r), GFP_ATOMIC);
		if (!r) {
			err = -ENOMEM;
			break;
		}
		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		memcpy(r->sge, wr->sg_list, wr->num_sge * sizeof(r->sge[0]));
		spin_lock_irqsave(&qp->lock, flags);
		if (qp->state == IB_QPS_RESET)
			err = -EINVAL;
		else if (qp->nrecv >= qp->cap.max_recv_wr)
			err = -ENOMEM;
		if (!err) {
			list_add_tail(&r->node, &qp->recvs);
			qp->nrecv++;
		}
		spin_unlock_irqrestore(&qp->lock, flags);
		if (err) {
			kfree(r);
			break;
		}
	}
	if (err)
		*bad = wr;
	return err;
}

/*
 * The 40 bytes before a UD payload (IBA 11.4.1.2): a GRH, or for RoCEv2
 * over IPv4 the IPv4 header in its last 20 bytes (Annex A17.4.5.1), which
 * is how ib_core tells the two apart.
 */
static enum rdma_network_type sroce_gsi_grh(const struct sroce_kgsi *h,
					    u8 *grh)
{
	struct ib_grh *g = (struct ib_grh *)grh;
	struct iphdr *ip = (struct iphdr *)(grh + 20);

	memset(grh, 0, sizeof(struct ib_grh));
	if (ipv6_addr_v4mapped((const struct in6_addr *)h->sgid) &&
	    ipv6_addr_v4mapped((const struct in6_addr *)h->dgid)) {
		ip->version = 4;
		ip->ihl = 5;
		ip->tos = h->traffic_class;
		ip->tot_len = htons(20 + 8 + h->len);
		ip->ttl = h->hop_limit ? h->hop_limit : 64;
		ip->protocol = IPPROTO_UDP;
		memcpy(&ip->saddr, h->sgid + 12, 4);
		memcpy(&ip->daddr, h->dgid + 12, 4);
		ip->check = ip_fast_csum((u8 *)ip, ip->ihl);
		return RDMA_NETWORK_IPV4;
	}
	g->version_tclass_flow = cpu_to_be32(6U << 28 |
					     (u32)h->traffic_class << 20 |
					     (h->flow_label & 0xfffff));
	g->paylen = cpu_to_be16(8 + h->len);
	g->next_hdr = IPPROTO_UDP;
	g->hop_limit = h->hop_limit;
	memcpy(g->sgid.raw, h->sgid, 16);
	memcpy(g->dgid.raw, h->dgid, 16);
	return RDMA_NETWORK_IPV6;
}

/* Scatters src at byte *off of the receive's buffers; false if too small. */
static bool sroce_gsi_scatter(struct sroce_gsi_recv *r, u32 *off,
			      const u8 *src, u32 len)
{
	u32 i, n, pos = 0, end;

	for (i = 0; i < r->num_sge && len; i++) {
		end = pos + r->sge[i].length;
		if (*off < end) {
			n = min(len, end - *off);
			memcpy((u8 *)(uintptr_t)r->sge[i].addr + (*off - pos),
			       src, n);
			src += n;
			len -= n;
			*off += n;
		}
		pos = end;
	}
	return len == 0;
}

int sroce_gsi_deliver(struct sroce_dev *sdev, const struct sroce_kgsi *h,
		      const void *mad)
{
	struct sroce_gsi_recv *r = NULL;
	u8 grh[sizeof(struct ib_grh)];
	struct ib_wc wc = {};
	struct sroce_qp *qp;
	unsigned long flags;
	u32 off = 0;

	spin_lock_irqsave(&sdev->chan_lock, flags);
	qp = sdev->gsi;
	if (qp) {
		spin_lock(&qp->lock);
		/* IBA 10.2.5 Q_Key check; a UD message with no receive
		 * posted is silently dropped (IBA 9.7.7).
		 */
		if ((qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS) &&
		    h->qkey == qp->qkey && !list_empty(&qp->recvs)) {
			r = list_first_entry(&qp->recvs,
					     struct sroce_gsi_recv, node);
			list_del(&r->node);
			qp->nrecv--;
		}
		spin_unlock(&qp->lock);
	}
	if (!r) {
		spin_unlock_irqrestore(&sdev->chan_lock, flags);
		atomic64_inc(&sdev->gsi_drop);
		return 0;
	}
	wc.network_hdr_type = sroce_gsi_grh(h, grh);
	wc.wr_id = r->wr_id;
	wc.opcode = IB_WC_RECV;
	wc.qp = &qp->ibqp;
	wc.src_qp = h->remote_qpn;
	wc.wc_flags = IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
	wc.port_num = SROCE_PORT;
	wc.byte_len = sizeof(grh) + h->len;
	if (sroce_gsi_scatter(r, &off, grh, sizeof(grh)) &&
	    sroce_gsi_scatter(r, &off, mad, h->len))
		wc.status = IB_WC_SUCCESS;
	else
		wc.status = IB_WC_LOC_LEN_ERR;
	sroce_kcq_push(to_scq(qp->ibqp.recv_cq), &wc, false);
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	atomic64_inc(&sdev->gsi_rx);
	kfree(r);
	return 0;
}
