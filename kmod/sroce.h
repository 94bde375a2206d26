/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * rdma_sroce: a soft-RoCE ib_device whose transport runs in sroced.
 *
 * The module gives unchanged programs a real ib_device (discovery, uverbs,
 * completion channels, pinned memory, the GSI QP rdma_cm needs) and hands
 * every protocol decision to sroced over one control channel (sroce_chan.c).
 * Roles, one file each:
 *   sroce_main.c  module, "rdma link add/delete", device lifetime
 *   sroce_net.c   the netdev: port attributes, GUID, GID table mirror
 *   sroce_verbs.c the ops table, queries, ucontext, PD, AH, mmap
 *   sroce_chan.c  the control channel to sroced (misc device /dev/sroce)
 *   sroce_ring.c  rings shared by provider, module and daemon; daemon maps
 *   sroce_mr.c    memory registration (ib_umem pinning)
 *   sroce_cq.c    CQs, completion and async events from sroced
 *   sroce_qp.c    QPs and SRQs of applications, doorbells
 *   sroce_gsi.c   the kernel GSI QP (QP1) whose MADs sroced carries
 */
#ifndef SROCE_H
#define SROCE_H

#include <linux/list.h>
#include <linux/netdevice.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "sroce_abi.h"

#define SROCE_DRV_NAME "rdma_sroce"
#define SROCE_PORT 1
#define SROCE_GID_TBL_LEN 32
#define SROCE_GSI_QPN 1
/* Kernel CQs and the GSI QP (ib_mad's): generous fixed limits. */
#define SROCE_KCQ_MAX 8192
#define SROCE_GSI_MAX_WR 1024
#define SROCE_GSI_MAX_SGE 4

extern unsigned int sroce_call_timeout_ms;

/* Live objects of every kind, checked at unload (a non-zero count is a leak). */
enum sroce_obj_kind {
	SROCE_OBJ_DEV,
	SROCE_OBJ_UCTX,
	SROCE_OBJ_PD,
	SROCE_OBJ_AH,
	SROCE_OBJ_MR,
	SROCE_OBJ_CQ,
	SROCE_OBJ_QP,
	SROCE_OBJ_SRQ,
	SROCE_OBJ_RING,
	SROCE_OBJ_REGION,
	SROCE_OBJ_CHAN,
	SROCE_OBJ_MW,
	SROCE_OBJ_KINDS,
};

extern atomic_t sroce_live[SROCE_OBJ_KINDS];

static inline void sroce_live_inc(enum sroce_obj_kind k)
{
	atomic_inc(&sroce_live[k]);
}

static inline void sroce_live_dec(enum sroce_obj_kind k)
{
	atomic_dec(&sroce_live[k]);
}

struct sroce_chan;

struct sroce_dev {
	struct ib_device ib;
	struct net_device *ndev;	/* held by ib_device_set_netdev */
	struct list_head node;		/* on sroce_devices */
	spinlock_t chan_lock;
	struct sroce_chan *chan;	/* the attached sroced, or NULL */
	struct sroce_device_attr limits; /* what sroced enforces */
	struct xarray ctxs;		/* context ids (REQUEST.ctx) */
	u32 next_ctx;			/* xa_alloc_cyclic's cursor for ctxs */
	struct xarray cqs;		/* CQ ids: user_handle of CREATE_CQ */
	struct xarray qps;		/* QP ids: user_handle of CREATE_QP */
	struct xarray srqs;		/* SRQ ids: user_handle of CREATE_SRQ */
	struct sroce_qp *gsi;		/* QP1, ib_mad's; under chan_lock */
	atomic_t port_active;		/* last port state reported */
	atomic_t resetting;		/* a reset is queued (sroce_dev_reset) */
	atomic64_t gsi_tx, gsi_rx, gsi_drop;
};

static inline struct sroce_dev *to_sdev(struct ib_device *ib)
{
	return container_of(ib, struct sroce_dev, ib);
}

struct sroce_ucontext {
	struct ib_ucontext ibuc;
	struct sroce_chan *chan;	/* the daemon that knows this context */
	u32 id;
};

struct sroce_pd {
	struct ib_pd ibpd;
	struct sroce_ucontext *uctx;	/* NULL: kernel PD */
	u32 handle;			/* sroced's; 0 for kernel PDs */
};

struct sroce_ah {
	struct ib_ah ibah;
	struct sroce_ucontext *uctx;	/* NULL: kernel AH */
	u32 handle;			/* sroced's; 0 for kernel AHs */
	struct sroce_ah_attr attr;	/* kernel AHs: what GSI sends use */
	u8 sgid[16];
};

/*
 * Memory shared with the provider (through uverbs mmap) and with sroced
 * (through the channel's mmap). vmalloc_user pages: each mapping holds page
 * references, so the memory outlives this struct while either side still
 * has it mapped.
 */
struct sroce_rbuf {
	struct rdma_user_mmap_entry rdma;
	void *vaddr;
	size_t bytes;			/* page multiple */
	struct sroce_region *region;	/* the daemon's view */
};

/* Something sroced may mmap from the channel. */
struct sroce_region {
	unsigned long pgoff;		/* globally unique, never reused */
	size_t bytes;
	bool writable;
	void *vaddr;			/* ring memory, or NULL */
	struct page **pages;		/* pinned MR pages, or NULL */
	unsigned long npages;
};

struct sroce_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;		/* NULL for the DMA MR */
	struct sroce_ucontext *uctx;	/* NULL: the DMA MR */
	struct sroce_region *region;
	int access;			/* as registered; rereg keeps what it does not change */
};

/* A memory window of an application (sroce_mw.c). */
struct sroce_mw {
	struct ib_mw ibmw;
	struct sroce_ucontext *uctx;
	u32 handle;			/* sroced's */
};

/* A kernel CQ (ib_mad's): completions kept in kernel memory. */
struct sroce_kcq {
	spinlock_t lock;		/* the fields below */
	struct ib_wc *wc;
	u32 size, head, count;
	u8 notify;			/* 0, IB_CQ_NEXT_COMP, IB_CQ_SOLICITED */
};

struct sroce_cq {
	struct ib_cq ibcq;
	u32 id;
	u32 handle;			/* sroced's */
	struct sroce_ucontext *uctx;	/* NULL: kernel CQ */
	struct sroce_rbuf *ring;
	struct sroce_kcq k;
};

struct sroce_gsi_recv {
	struct list_head node;
	u64 wr_id;
	u32 num_sge;
	struct ib_sge sge[SROCE_GSI_MAX_SGE];
};

struct sroce_qp {
	struct ib_qp ibqp;
	u32 id;
	struct sroce_ucontext *uctx;	/* NULL: the kernel GSI QP */
	struct sroce_rbuf *ring;
	size_t rq_offset;		/* RQ ring header; 0: none (SRQ) */
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;
	/* GSI state (kernel QP only), under lock */
	spinlock_t lock;
	enum ib_qp_state state;
	u32 qkey;
	u32 sq_psn;
	u16 pkey_index;
	struct list_head recvs;
	u32 nrecv, nsend;
};

struct sroce_srq {
	struct ib_srq ibsrq;
	u32 id;
	u32 handle;			/* sroced's */
	struct sroce_ucontext *uctx;
	struct sroce_rbuf *ring;
};

#define to_suctx(x) container_of(x, struct sroce_ucontext, ibuc)
#define to_spd(x) container_of(x, struct sroce_pd, ibpd)
#define to_sah(x) container_of(x, struct sroce_ah, ibah)
#define to_smr(x) container_of(x, struct sroce_mr, ibmr)
#define to_scq(x) container_of(x, struct sroce_cq, ibcq)
#define to_sqp(x) container_of(x, struct sroce_qp, ibqp)
#define to_ssrq(x) container_of(x, struct sroce_srq, ibsrq)
#define to_smw(x) container_of(x, struct sroce_mw, ibmw)

static inline struct sroce_ucontext *sroce_uctx(struct ib_udata *udata)
{
	return rdma_udata_to_drv_context(udata, struct sroce_ucontext, ibuc);
}

/* sroce_main.c */
struct sroce_dev *sroce_dev_get_by_name(const char *name);
void sroce_dev_put(struct sroce_dev *sdev);
void sroce_dealloc_driver(struct ib_device *ib);
void sroce_dev_reset(struct sroce_dev *sdev);

/* sroce_net.c */
int sroce_net_init(void);
void sroce_net_exit(void);
void sroce_set_guid(struct sroce_dev *sdev);
enum ib_port_state sroce_port_state(struct sroce_dev *sdev);
void sroce_port_update(struct sroce_dev *sdev);
int sroce_add_gid(const struct ib_gid_attr *attr, void **context);
int sroce_del_gid(const struct ib_gid_attr *attr, void **context);
void sroce_send_gid_table(struct sroce_dev *sdev, struct sroce_chan *chan);
int sroce_query_port(struct ib_device *ib, u32 port, struct ib_port_attr *attr);

/* sroce_verbs.c */
extern const struct ib_device_ops sroce_dev_ops;
void sroce_default_limits(struct sroce_device_attr *a);
void sroce_apply_limits(struct sroce_dev *sdev,
			const struct sroce_device_attr *l);

/* sroce_chan.c */
int sroce_chan_init(void);
void sroce_chan_exit(void);
struct sroce_chan *sroce_dev_chan(struct sroce_dev *sdev);
void sroce_chan_get(struct sroce_chan *chan);
void sroce_chan_put(struct sroce_chan *chan);
bool sroce_chan_alive(struct sroce_chan *chan);
void sroce_chan_device_gone(struct sroce_dev *sdev);
void sroce_chan_doorbell(struct sroce_chan *chan);
int sroce_call(struct sroce_chan *chan, u32 ctx, u16 op,
	       const void *body, u16 blen, const void *ext, u16 elen,
	       void *resp, u16 rlen);
int sroce_notify(struct sroce_chan *chan, u32 kind, u32 ctx,
		 const void *a, u16 alen, const void *b, u16 blen, gfp_t gfp);
int sroce_chan_add_region(struct sroce_chan *chan, struct sroce_region *r);
void sroce_chan_del_region(struct sroce_chan *chan, struct sroce_region *r);

static inline int sroce_ucall(struct sroce_ucontext *uctx, u16 op,
			      const void *body, u16 blen,
			      const void *ext, u16 elen,
			      void *resp, u16 rlen)
{
	return sroce_call(uctx->chan, uctx->id, op, body, blen, ext, elen,
			  resp, rlen);
}

/* sroce_ring.c */
struct sroce_rbuf *sroce_ring_alloc(struct sroce_ucontext *uctx, size_t bytes);
void sroce_ring_free(struct sroce_ucontext *uctx, struct sroce_rbuf *ring);
void sroce_ring_init(void *at, u32 size, u32 entry_size);
void sroce_ring_set_error(struct sroce_rbuf *ring, size_t offset);
void sroce_ring_kmap(struct sroce_rbuf *ring, struct sroce_kmap *map);
int sroce_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
void sroce_mmap_free(struct rdma_user_mmap_entry *entry);
struct sroce_region *sroce_region_new(size_t bytes, bool writable);
void sroce_region_free(struct sroce_region *r);
int sroce_region_mmap(struct sroce_region *r, struct vm_area_struct *vma);
vm_fault_t sroce_region_fault(struct sroce_region *r, struct vm_fault *vmf);
unsigned long sroce_ring_entries_offset(void);

/* sroce_mr.c */
struct ib_mr *sroce_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *sroce_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata);
int sroce_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);

/* sroce_mw.c */
int sroce_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int sroce_dealloc_mw(struct ib_mw *ibmw);
struct ib_mr *sroce_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				  u64 length, u64 iova, int access,
				  struct ib_pd *pd, struct ib_udata *udata);

/* sroce_cq.c */
int sroce_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata);
int sroce_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int sroce_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int sroce_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc);
int sroce_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void sroce_kcq_push(struct sroce_cq *cq, const struct ib_wc *wc,
		    bool solicited);
int sroce_comp_event(struct sroce_dev *sdev, struct sroce_chan *chan,
		     const struct sroce_comp_event_desc *ev);
int sroce_async_event(struct sroce_dev *sdev, struct sroce_chan *chan,
		      const struct sroce_async_event_desc *ev);
void sroce_daemon_gone(struct sroce_dev *sdev, struct sroce_chan *chan);

/* sroce_qp.c */
int sroce_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata);
int sroce_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata);
int sroce_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init);
int sroce_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int sroce_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad);
int sroce_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad);
int sroce_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int sroce_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int sroce_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int sroce_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int sroce_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad);
void sroce_qp_set_error(struct sroce_qp *qp);
void sroce_ah_to_abi(const struct rdma_ah_attr *ah, struct sroce_ah_attr *out);

/* sroce_gsi.c */
int sroce_gsi_create(struct sroce_qp *qp, struct ib_qp_init_attr *init);
void sroce_gsi_destroy(struct sroce_qp *qp);
int sroce_gsi_modify(struct sroce_qp *qp, struct ib_qp_attr *attr, int mask);
int sroce_gsi_query(struct sroce_qp *qp, struct ib_qp_attr *attr);
int sroce_gsi_post_send(struct sroce_qp *qp, const struct ib_send_wr *wr,
			const struct ib_send_wr **bad);
int sroce_gsi_post_recv(struct sroce_qp *qp, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad);
int sroce_gsi_deliver(struct sroce_dev *sdev, const struct sroce_kgsi *hdr,
		      const void *mad);

#endif /* SROCE_H */
