// SPDX-License-Identifier: MIT
/* kmock: the answer to each request, as sroced's kernel path gives it. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "kmock.h"

#define BODY(type, name)                                                   \
	const type *name = (const void *)body;                             \
	if (blen < sizeof(type))                                           \
		return -EINVAL

/* Answers one request; returns the status and fills the reply body. */
int handle(int dev, uint32_t ctx, uint16_t op, const uint8_t *body,
		  size_t blen, uint8_t *resp, size_t *rlen)
{
	struct obj *o;
	int err;

	*rlen = 0;
	switch (op) {
	case SROCE_OP_HELLO: {
		BODY(struct sroce_hello, h);
		struct sroce_hello_resp *r = (void *)resp;

		if (h->abi_version != SROCE_ABI_VERSION)
			return -EPROTONOSUPPORT;
		r->abi_version = SROCE_ABI_VERSION;
		r->context = ctx;
		*rlen = sizeof(*r);
		return 0;
	}
	case SROCE_OP_ALLOC_PD:
	case SROCE_OP_CREATE_AH: {
		struct sroce_handle_resp *r = (void *)resp;

		o = new_obj(op == SROCE_OP_ALLOC_PD ? K_PD : K_AH, dev, ctx);
		if (!o)
			return -ENOMEM;
		r->handle = o->handle;
		*rlen = sizeof(*r);
		return 0;
	}
	case SROCE_OP_REG_MR: {
		BODY(struct sroce_reg_mr, m);
		const struct sroce_kmr_ext *x = (const void *)(m + 1);
		struct sroce_reg_mr_resp *r = (void *)resp;

		if (blen != sizeof(*m) + sizeof(*x))
			return -EINVAL;
		if (!find(K_PD, dev, ctx, m->pd))
			return -EINVAL;
		o = new_obj(K_MR, dev, ctx);
		if (!o)
			return -ENOMEM;
		if (!x->writable) {
			/* a read-only MR must not be mappable for writing */
			struct map w;

			if (map_region(dev, &x->map, true, &w) == -EACCES) {
				st.ro_refused++;
			} else {
				st.ro_violations++;
				munmap(w.base, w.bytes);
			}
		}
		err = map_region(dev, &x->map, x->writable, &o->map);
		if (err) {
			free_obj(o);
			return err;
		}
		o->addr = m->addr;
		o->length = m->length;
		o->first_byte = x->first_byte;
		o->writable = x->writable;
		o->access = m->access;
		o->rkey = 0x100000 | o->handle;
		/* Zero copy, both ways: the MR's first bytes as the app
		 * wrote them; "kmock-mr" at its end for the app to find. */
		if (m->length >= 16 &&
		    !memcmp(o->map.base + o->first_byte, "kverbs-mr", 9)) {
			st.mr_checked++;
			if (o->writable)
				memcpy(o->map.base + o->first_byte +
					       m->length - 8,
				       "kmock-mr", 8);
		}
		r->lkey = o->handle;
		r->rkey = o->rkey;
		*rlen = sizeof(*r);
		return 0;
	}
	case SROCE_OP_CREATE_CQ:
	case SROCE_OP_CREATE_SRQ: {
		const struct sroce_kring_ext *x;
		bool cq = op == SROCE_OP_CREATE_CQ;
		size_t fixed = cq ? sizeof(struct sroce_create_cq) :
				    sizeof(struct sroce_create_srq);

		if (blen != fixed + sizeof(*x))
			return -EINVAL;
		x = (const void *)(body + fixed);
		if (cq && ((const struct sroce_create_cq *)body)->channel !=
				  SROCE_KCHANNEL)
			return -EINVAL;
		o = new_obj(cq ? K_CQ : K_SRQ, dev, ctx);
		if (!o)
			return -ENOMEM;
		err = map_region(dev, &x->map, true, &o->map);
		if (err) {
			free_obj(o);
			return err;
		}
		ring_at(cq ? &o->cq : &o->srqr, o->map.base);
		if (o->cq.hdr && (o->cq.hdr->size != x->size ||
				  o->cq.hdr->entry_size != x->entry_size)) {
			free_obj(o);
			return -EINVAL;
		}
		if (cq) {
			struct sroce_create_cq_resp *r = (void *)resp;

			o->user_handle =
				((const struct sroce_create_cq *)body)->user_handle;
			r->handle = o->handle;
			r->cqe = x->size;
			r->ring_bytes = x->map.bytes;
			*rlen = sizeof(*r);
		} else {
			const struct sroce_create_srq *s = (const void *)body;
			struct sroce_create_srq_resp *r = (void *)resp;

			o->user_handle = s->user_handle;
			o->srq_limit = s->srq_limit;
			r->handle = o->handle;
			r->max_wr = s->max_wr;
			r->max_sge = s->max_sge;
			r->ring_bytes = x->map.bytes;
			*rlen = sizeof(*r);
		}
		return 0;
	}
	case SROCE_OP_CREATE_QP: {
		BODY(struct sroce_create_qp, q);
		const struct sroce_kqp_ext *x = (const void *)(q + 1);
		struct sroce_create_qp_resp *r = (void *)resp;

		if (blen != sizeof(*q) + sizeof(*x))
			return -EINVAL;
		if (!find(K_PD, dev, ctx, q->pd) ||
		    !find(K_CQ, dev, ctx, q->send_cq) ||
		    !find(K_CQ, dev, ctx, q->recv_cq) ||
		    (q->srq && !find(K_SRQ, dev, ctx, q->srq)))
			return -EINVAL;
		o = new_obj(K_QP, dev, ctx);
		if (!o)
			return -ENOMEM;
		o->handle = 0x100 + o->handle; /* QPNs above the special QPs */
		err = map_region(dev, &x->map, true, &o->map);
		if (err) {
			free_obj(o);
			return err;
		}
		ring_at(&o->sq, o->map.base + x->sq_offset);
		if (x->rq_offset != ~0ull)
			ring_at(&o->rq, o->map.base + x->rq_offset);
		if (o->sq.hdr->size != x->sq_size ||
		    o->sq.hdr->entry_size != x->sq_entry_size) {
			free_obj(o);
			return -EINVAL;
		}
		o->user_handle = q->user_handle;
		o->send_cq = q->send_cq;
		o->recv_cq = q->recv_cq;
		o->srq = q->srq;
		o->qp_type = q->qp_type;
		o->sig_all = q->sq_sig_all;
		o->state = IBV_QPS_RESET;
		r->qpn = o->handle;
		r->cap = q->cap;
		r->ring_bytes = x->map.bytes;
		r->sq_offset = x->sq_offset;
		r->rq_offset = x->rq_offset;
		*rlen = sizeof(*r);
		return 0;
	}
	case SROCE_OP_MODIFY_QP: {
		BODY(struct sroce_modify_qp, m);

		o = find(K_QP, dev, ctx, m->qpn);
		if (!o)
			return -EINVAL;
		/* a refusal the tests can ask for */
		if ((m->attr_mask & IBV_QP_QKEY) && m->attr.qkey == 0xbad)
			return -EINVAL;
		if (m->attr_mask & IBV_QP_QKEY)
			o->qkey = m->attr.qkey;
		if (m->attr_mask & IBV_QP_STATE)
			o->state = m->attr.qp_state;
		/* IBA 11.6.3.1: an SRQ QP entering the error state reports
		 * Last WQE Reached. */
		if ((m->attr_mask & IBV_QP_STATE) && o->srq &&
		    m->attr.qp_state == IBV_QPS_ERR) {
			post_event.set = true;
			post_event.ev.element = o->user_handle;
			post_event.ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
		}
		return 0;
	}
	case SROCE_OP_QUERY_QP: {
		BODY(struct sroce_handle_req, h);
		struct sroce_qp_attr *a = (void *)resp;

		o = find(K_QP, dev, ctx, h->handle);
		if (!o)
			return -EINVAL;
		memset(a, 0, sizeof(*a));
		a->qp_state = o->state;
		a->cur_qp_state = o->state;
		a->qkey = o->qkey;
		a->path_mtu = IBV_MTU_1024;
		*rlen = sizeof(*a);
		return 0;
	}
	case SROCE_OP_MODIFY_SRQ: {
		BODY(struct sroce_modify_srq, m);

		o = find(K_SRQ, dev, ctx, m->handle);
		if (!o)
			return -EINVAL;
		if (m->attr_mask & IBV_SRQ_MAX_WR)
			return -EOPNOTSUPP;
		if (m->attr_mask & IBV_SRQ_LIMIT)
			o->srq_limit = m->srq_limit;
		return 0;
	}
	case SROCE_OP_QUERY_SRQ: {
		BODY(struct sroce_handle_req, h);
		struct sroce_srq_attr *a = (void *)resp;

		o = find(K_SRQ, dev, ctx, h->handle);
		if (!o)
			return -EINVAL;
		a->max_wr = o->srqr.hdr->size;
		a->max_sge = 1;
		a->srq_limit = o->srq_limit;
		*rlen = sizeof(*a);
		return 0;
	}
	case SROCE_OP_DEALLOC_PD:
	case SROCE_OP_DEREG_MR:
	case SROCE_OP_DESTROY_CQ:
	case SROCE_OP_DESTROY_QP:
	case SROCE_OP_DESTROY_SRQ:
	case SROCE_OP_DESTROY_AH: {
		static const enum kind kinds[SROCE_OP_COUNT] = {
			[SROCE_OP_DEALLOC_PD] = K_PD,
			[SROCE_OP_DEREG_MR] = K_MR,
			[SROCE_OP_DESTROY_CQ] = K_CQ,
			[SROCE_OP_DESTROY_QP] = K_QP,
			[SROCE_OP_DESTROY_SRQ] = K_SRQ,
			[SROCE_OP_DESTROY_AH] = K_AH,
		};
		BODY(struct sroce_handle_req, h);

		o = find(kinds[op], dev, ctx, h->handle);
		if (!o)
			return -EINVAL;
		free_obj(o);
		if (op == SROCE_OP_DESTROY_QP) {
			struct sroce_destroy_qp_resp *r = (void *)resp;

			memset(r, 0, sizeof(*r));
			*rlen = sizeof(*r);
		}
		return 0;
	}
	default:
		return -EOPNOTSUPP;
	}
}
