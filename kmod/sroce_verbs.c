// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The verbs table, device queries, and the small objects: user contexts,
 * protection domains and address handles. Each user object is mirrored to
 * sroced with the socket path's message (sroce_abi.h); kernel objects (the
 * ones ib_mad makes for QP1) stay in the kernel.
 */
#include <linux/cred.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "sroce.h"

/* Until sroced attaches and says otherwise: its default configuration. */
void sroce_default_limits(struct sroce_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->max_mr_size = 1ULL << 47;
	a->page_size_cap = PAGE_SIZE;
	a->vendor_id = 0xffffff;	/* no IEEE OUI, as soft-RoCE */
	a->max_qp = 1024;
	a->max_qp_wr = 16384;
	a->max_sge = 32;
	a->max_cq = 1024;
	a->max_cqe = 65536;
	a->max_mr = 4096;
	a->max_pd = 1024;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_srq = 256;
	a->max_srq_wr = 16384;
	a->max_srq_sge = 32;
	a->max_ah = 4096;
	a->max_inline_data = 256;
	a->max_pkeys = 1;
	a->atomic_cap = IB_ATOMIC_HCA;
	a->phys_port_cnt = 1;
}

static void sroce_fill_attr(struct sroce_dev *sdev, struct ib_device_attr *a)
{
	const struct sroce_device_attr *l = &sdev->limits;

	memset(a, 0, sizeof(*a));
	a->fw_ver = 0;
	a->sys_image_guid = sdev->ib.node_guid;
	a->max_mr_size = l->max_mr_size;
	a->page_size_cap = l->page_size_cap;
	a->vendor_id = l->vendor_id ? l->vendor_id : 0xffffff;
	a->vendor_part_id = l->vendor_part_id;
	a->hw_ver = l->hw_ver;
	a->max_qp = l->max_qp;
	a->max_qp_wr = l->max_qp_wr;
	a->device_cap_flags = IB_DEVICE_RC_RNR_NAK_GEN |
			      IB_DEVICE_SHUTDOWN_PORT |
			      IB_DEVICE_PORT_ACTIVE_EVENT |
			      IB_DEVICE_SYS_IMAGE_GUID |
			      IB_DEVICE_MEM_WINDOW |	/* sroce_mw.c */
			      IB_DEVICE_MEM_WINDOW_TYPE_2B;
	a->kernel_cap_flags = IBK_ALLOW_USER_UNREG | IBK_LOCAL_DMA_LKEY;
	a->max_send_sge = l->max_sge;
	a->max_recv_sge = l->max_sge;
	a->max_sge_rd = l->max_sge;
	a->max_cq = l->max_cq;
	a->max_cqe = l->max_cqe;
	a->max_mr = l->max_mr;
	a->max_mw = l->max_mr;	/* windows share sroced's MR table */
	a->max_pd = l->max_pd;
	a->max_qp_rd_atom = l->max_qp_rd_atom;
	a->max_qp_init_rd_atom = l->max_qp_init_rd_atom;
	a->max_res_rd_atom = l->max_qp_rd_atom * l->max_qp;
	a->atomic_cap = l->atomic_cap <= IB_ATOMIC_GLOB ? l->atomic_cap :
			IB_ATOMIC_NONE;
	a->max_ah = l->max_ah;
	a->max_srq = l->max_srq;
	a->max_srq_wr = l->max_srq_wr;
	a->max_srq_sge = l->max_srq_sge;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	/* Completion timestamps: sroced stamps each CQE with its CLOCK_MONOTONIC
	 * in nanoseconds (sroce_cqe.timestamp), a 64-bit clock of 1 GHz (kHz here).
	 */
	a->hca_core_clock = 1000000;
	a->timestamp_mask = ~0ULL;
}

/* sroced's limits at attach: what uverbs answers from then on (it caches
 * ib_device.attrs, filled by query_device at registration).
 */
void sroce_apply_limits(struct sroce_dev *sdev,
			const struct sroce_device_attr *l)
{
	sdev->limits = *l;
	sroce_fill_attr(sdev, &sdev->ib.attrs);
}

static int sroce_query_device(struct ib_device *ib, struct ib_device_attr *a,
			      struct ib_udata *udata)
{
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	sroce_fill_attr(to_sdev(ib), a);
	return 0;
}

static int sroce_query_pkey(struct ib_device *ib, u32 port, u16 index,
			    u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static int sroce_get_port_immutable(struct ib_device *ib, u32 port,
				    struct ib_port_immutable *imm)
{
	struct ib_port_attr attr;
	int err;

	err = ib_query_port(ib, port, &attr);
	if (err)
		return err;
	/* RoCEv2 only (Annex A17): every GID of the table is UDP-encapsulated. */
	imm->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	imm->pkey_tbl_len = attr.pkey_tbl_len;
	imm->gid_tbl_len = attr.gid_tbl_len;
	imm->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer sroce_get_link_layer(struct ib_device *ib,
						 u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

/* Copies a response the provider must have room for. */
static int sroce_respond(struct ib_udata *udata, void *resp, size_t len)
{
	if (udata->outlen < len)
		return -EINVAL;
	return ib_copy_to_udata(udata, resp, len);
}

static int sroce_alloc_ucontext(struct ib_ucontext *ibuc,
				struct ib_udata *udata)
{
	struct sroce_dev *sdev = to_sdev(ibuc->device);
	struct sroce_ucontext *uctx = to_suctx(ibuc);
	struct sroce_hello hello = { .abi_version = SROCE_ABI_VERSION };
	struct sroce_khello_ext who = {
		.uid = from_kuid_munged(&init_user_ns, current_euid()),
		.gid = from_kgid_munged(&init_user_ns, current_egid()),
		.pid = task_tgid_nr(current),
	};
	struct sroce_hello_resp hresp;
	struct sroce_kuctx_resp resp = { .abi_version = SROCE_KABI_VERSION };
	int err;

	uctx->chan = sroce_dev_chan(sdev);
	if (!uctx->chan) {
		dev_info_ratelimited(&sdev->ib.dev,
				     "open refused: sroced is not running for %s (start sroced --netdev %s)\n",
				     sdev->ib.name, sdev->ndev->name);
		return -ENOTCONN;
	}
	/* Cyclic: an id is not handed out again soon after its context went,
	 * so nothing the daemon still has under it meets a new context.
	 */
	err = xa_alloc_cyclic(&sdev->ctxs, &uctx->id, uctx, xa_limit_31b,
			      &sdev->next_ctx, GFP_KERNEL);
	if (err < 0)
		goto err_put;
	err = sroce_ucall(uctx, SROCE_OP_HELLO, &hello, sizeof(hello), &who,
			  sizeof(who), &hresp, sizeof(hresp));
	/* Given up (timeout, fatal signal): the daemon may have read the HELLO
	 * and answer it late, so it may hold the context: the CLOSE, queued
	 * behind the HELLO, drops it (a CLOSE of an unknown id is ignored).
	 */
	if (err == -ETIMEDOUT || err == -EINTR)
		goto err_close;
	if (err)
		goto err_erase;
	resp.ctx = uctx->id;
	err = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (err)
		goto err_close;
	sroce_live_inc(SROCE_OBJ_UCTX);
	return 0;

err_close:
	sroce_notify(uctx->chan, SROCE_KMSG_CLOSE, uctx->id, NULL, 0, NULL, 0,
		     GFP_KERNEL | __GFP_NOFAIL);
err_erase:
	xa_erase(&sdev->ctxs, uctx->id);
err_put:
	sroce_chan_put(uctx->chan);
	uctx->chan = NULL;
	return err;
}

/* The socket path's hang-up: sroced drops whatever the context still has. */
static void sroce_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct sroce_ucontext *uctx = to_suctx(ibuc);

	sroce_notify(uctx->chan, SROCE_KMSG_CLOSE, uctx->id, NULL, 0, NULL, 0,
		     GFP_KERNEL | __GFP_NOFAIL);
	xa_erase(&to_sdev(ibuc->device)->ctxs, uctx->id);
	sroce_chan_put(uctx->chan);
	sroce_live_dec(SROCE_OBJ_UCTX);
}

/*
 * Unregistration under open programs (rdma link delete, rmmod, the reset
 * after sroced's death): ib_uverbs destroys their objects through the usual
 * destroy verbs and fails their later calls with EIO. Nothing is left to
 * stop here: sroced learns of every destroy (or is gone), and the ring
 * memory a program still maps holds page references of its own.
 */
static void sroce_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static int sroce_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct sroce_pd *pd = to_spd(ibpd);
	struct sroce_handle_resp resp;
	int err;

	if (udata) {
		pd->uctx = sroce_uctx(udata);
		err = sroce_ucall(pd->uctx, SROCE_OP_ALLOC_PD, NULL, 0, NULL,
				  0, &resp, sizeof(resp));
		if (err)
			return err;
		pd->handle = resp.handle;
	}
	sroce_live_inc(SROCE_OBJ_PD);
	return 0;
}

/* Destroy verbs never fail locally (uverbs cannot undo a close). */
static int sroce_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct sroce_pd *pd = to_spd(ibpd);
	struct sroce_handle_req req = { .handle = pd->handle };

	if (pd->uctx)
		sroce_ucall(pd->uctx, SROCE_OP_DEALLOC_PD, &req, sizeof(req),
			    NULL, 0, NULL, 0);
	sroce_live_dec(SROCE_OBJ_PD);
	return 0;
}

void sroce_ah_to_abi(const struct rdma_ah_attr *ah, struct sroce_ah_attr *out)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(ah);

	memset(out, 0, sizeof(*out));
	memcpy(out->dgid, grh->dgid.raw, sizeof(out->dgid));
	out->flow_label = grh->flow_label;
	out->sgid_index = grh->sgid_index;
	out->hop_limit = grh->hop_limit;
	out->traffic_class = grh->traffic_class;
	out->sl = rdma_ah_get_sl(ah);
	out->port_num = rdma_ah_get_port_num(ah);
	out->is_global = !!(rdma_ah_get_ah_flags(ah) & IB_AH_GRH);
}

static int sroce_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			   struct ib_udata *udata)
{
	struct sroce_ah *ah = to_sah(ibah);
	struct sroce_create_ah req = { .pd = to_spd(ibah->pd)->handle };
	struct sroce_kah_resp kresp = {};
	struct sroce_handle_resp resp;
	const struct ib_gid_attr *sgid;
	int err;

	/* RoCE addresses are global (IBA A16.4.4: the GRH is required). */
	if (init->ah_attr->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(init->ah_attr) & IB_AH_GRH))
		return -EINVAL;
	sroce_ah_to_abi(init->ah_attr, &ah->attr);
	sgid = rdma_ah_read_grh(init->ah_attr)->sgid_attr;
	if (sgid)
		memcpy(ah->sgid, sgid->gid.raw, sizeof(ah->sgid));
	if (udata) {
		ah->uctx = sroce_uctx(udata);
		req.attr = ah->attr;
		err = sroce_ucall(ah->uctx, SROCE_OP_CREATE_AH, &req,
				  sizeof(req), NULL, 0, &resp, sizeof(resp));
		if (err)
			return err;
		ah->handle = resp.handle;
		kresp.handle = resp.handle;
		err = sroce_respond(udata, &kresp, sizeof(kresp));
		if (err) {
			struct sroce_handle_req dreq = { .handle = ah->handle };

			sroce_ucall(ah->uctx, SROCE_OP_DESTROY_AH, &dreq,
				    sizeof(dreq), NULL, 0, NULL, 0);
			return err;
		}
	}
	sroce_live_inc(SROCE_OBJ_AH);
	return 0;
}

static int sroce_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct sroce_ah *ah = to_sah(ibah);
	struct sroce_handle_req req = { .handle = ah->handle };

	if (ah->uctx)
		sroce_ucall(ah->uctx, SROCE_OP_DESTROY_AH, &req, sizeof(req),
			    NULL, 0, NULL, 0);
	sroce_live_dec(SROCE_OBJ_AH);
	return 0;
}

static int sroce_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct sroce_ah *ah = to_sah(ibah);
	union ib_gid dgid;

	memset(attr, 0, sizeof(*attr));
	attr->type = RDMA_AH_ATTR_TYPE_ROCE;
	memcpy(dgid.raw, ah->attr.dgid, sizeof(dgid.raw));
	rdma_ah_set_grh(attr, &dgid, ah->attr.flow_label, ah->attr.sgid_index,
			ah->attr.hop_limit, ah->attr.traffic_class);
	rdma_ah_set_sl(attr, ah->attr.sl);
	rdma_ah_set_port_num(attr, SROCE_PORT);
	return 0;
}

static void sroce_get_dev_fw_str(struct ib_device *ib, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "sroce-%u", SROCE_ABI_VERSION);
}

const struct ib_device_ops sroce_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = SROCE_ABI_VERSION,

	.add_gid = sroce_add_gid,
	.alloc_mw = sroce_alloc_mw,
	.alloc_pd = sroce_alloc_pd,
	.alloc_ucontext = sroce_alloc_ucontext,
	.create_ah = sroce_create_ah,
	.create_user_ah = sroce_create_ah,
	.create_cq = sroce_create_cq,
	.create_qp = sroce_create_qp,
	.create_srq = sroce_create_srq,
	.dealloc_driver = sroce_dealloc_driver,
	.dealloc_mw = sroce_dealloc_mw,
	.dealloc_pd = sroce_dealloc_pd,
	.dealloc_ucontext = sroce_dealloc_ucontext,
	.disassociate_ucontext = sroce_disassociate_ucontext,
	.del_gid = sroce_del_gid,
	.dereg_mr = sroce_dereg_mr,
	.destroy_ah = sroce_destroy_ah,
	.destroy_cq = sroce_destroy_cq,
	.destroy_qp = sroce_destroy_qp,
	.destroy_srq = sroce_destroy_srq,
	.get_dev_fw_str = sroce_get_dev_fw_str,
	.get_dma_mr = sroce_get_dma_mr,
	.get_link_layer = sroce_get_link_layer,
	.get_port_immutable = sroce_get_port_immutable,
	.mmap = sroce_mmap,
	.mmap_free = sroce_mmap_free,
	.modify_qp = sroce_modify_qp,
	.modify_srq = sroce_modify_srq,
	.poll_cq = sroce_poll_cq,
	.post_recv = sroce_post_recv,
	.post_send = sroce_post_send,
	.post_srq_recv = sroce_post_srq_recv,
	.query_ah = sroce_query_ah,
	.query_device = sroce_query_device,
	.query_pkey = sroce_query_pkey,
	.query_port = sroce_query_port,
	.query_qp = sroce_query_qp,
	.query_srq = sroce_query_srq,
	.reg_user_mr = sroce_reg_user_mr,
	.rereg_user_mr = sroce_rereg_user_mr,
	.req_notify_cq = sroce_req_notify_cq,
	.resize_cq = sroce_resize_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, sroce_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, sroce_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, sroce_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, sroce_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, sroce_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, sroce_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, sroce_ucontext, ibuc),
};
