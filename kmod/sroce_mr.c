// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Memory registration. ib_umem pins the application's pages; sroced maps
 * those very pages through the channel (no process_vm_readv copies on this
 * path) and names the MR by the keys it returns (IBA 10.6).
 */
#include <linux/mm.h>
#include <linux/slab.h>

#include "sroce.h"

#define SROCE_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | \
			 IB_ACCESS_RELAXED_ORDERING | IB_ACCESS_MW_BIND)

/* Kernel users' local DMA MR (lkey 0 = the device's local_dma_lkey). */
struct ib_mr *sroce_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct sroce_mr *mr;

	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_RELAXED_ORDERING))
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	sroce_live_inc(SROCE_OBJ_MR);
	return &mr->ibmr;
}

static struct page **sroce_umem_pages(struct ib_umem *umem,
				      unsigned long *npages)
{
	struct sg_page_iter iter;
	struct page **pages;
	unsigned long n = 0, want = ib_umem_num_pages(umem);

	pages = kvmalloc_array(want, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return NULL;
	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == want)
			break;
		pages[n++] = sg_page_iter_page(&iter);
	}
	if (n != want) {
		kvfree(pages);
		return NULL;
	}
	*npages = n;
	return pages;
}

/* Pins [start, start + length) and offers its pages to sroced as a region. */
static int sroce_mr_pin(struct sroce_ucontext *uctx, struct ib_device *dev,
			u64 start, u64 length, int access,
			struct ib_umem **umem, struct sroce_region **region,
			struct sroce_kmr_ext *ext)
{
	struct sroce_region *r;
	unsigned long npages;
	int err = -ENOMEM;

	*umem = ib_umem_get(dev, start, length, access);
	if (IS_ERR(*umem))
		return PTR_ERR(*umem);
	r = sroce_region_new(ib_umem_num_pages(*umem) << PAGE_SHIFT,
			     (*umem)->writable);
	if (!r)
		goto err_umem;
	r->pages = sroce_umem_pages(*umem, &npages);
	if (!r->pages) {
		sroce_region_free(r);
		goto err_umem;
	}
	err = sroce_chan_add_region(uctx->chan, r);
	if (err) {
		kvfree(r->pages);
		sroce_region_free(r);
		goto err_umem;
	}
	ext->map.offset = (u64)r->pgoff << PAGE_SHIFT;
	ext->map.bytes = r->bytes;
	ext->first_byte = ib_umem_offset(*umem);
	ext->writable = r->writable;
	*region = r;
	return 0;

err_umem:
	ib_umem_release(*umem);
	return err;
}

/* Takes a pinned range back from sroced (zaps its mapping) and unpins it. */
static void sroce_mr_unpin(struct sroce_ucontext *uctx, struct ib_umem *umem,
			   struct sroce_region *r)
{
	struct page **pages = r->pages;

	sroce_chan_del_region(uctx->chan, r);	/* zaps, then frees r */
	kvfree(pages);
	ib_umem_release(umem);
}

struct ib_mr *sroce_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata)
{
	struct sroce_ucontext *uctx = sroce_uctx(udata);
	struct sroce_reg_mr req = {
		.addr = start, .length = length, .iova = iova,
		.pd = to_spd(ibpd)->handle, .access = access,
	};
	struct sroce_kmr_ext ext = {};
	struct sroce_reg_mr_resp resp;
	struct sroce_mr *mr;
	int err;

	/* No ODP: the pages are pinned. */
	if (access & ~SROCE_MR_ACCESS)
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || length > to_sdev(ibpd->device)->limits.max_mr_size)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->uctx = uctx;
	err = sroce_mr_pin(uctx, ibpd->device, start, length, access,
			   &mr->umem, &mr->region, &ext);
	if (err)
		goto err_free;
	err = sroce_ucall(uctx, SROCE_OP_REG_MR, &req, sizeof(req), &ext,
			  sizeof(ext), &resp, sizeof(resp));
	if (err)
		goto err_unpin;
	mr->ibmr.lkey = resp.lkey;
	mr->ibmr.rkey = resp.rkey;
	mr->access = access;
	/* ib_uverbs sets these after reg_mr, not for the MR a rereg returns */
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	sroce_live_inc(SROCE_OBJ_MR);
	return &mr->ibmr;

err_unpin:
	sroce_mr_unpin(uctx, mr->umem, mr->region);
err_free:
	kfree(mr);
	return ERR_PTR(err);
}

/*
 * ibv_rereg_mr (IBA 11.2.8.7, "Reregister Memory Region"), in place, so the
 * keys stay (peers that hold the rkey go on using it) and sroced applies the
 * change to its MR. A new PD or new rights change the MR as it is; rights
 * that need writable pages on a registration pinned read-only are refused
 * (EOPNOTSUPP). A new translation pins the new range first and offers it to
 * sroced with the request (sroce_kmr_ext, as REG_MR); once sroced has moved
 * the MR (and unmapped the old pages) the old range is unpinned; if sroced
 * refuses, the new pin goes and the MR is as it was. Returning NULL tells
 * ib_uverbs the MR changed in place (it then sets iova, length and PD).
 */
struct ib_mr *sroce_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				  u64 length, u64 iova, int access,
				  struct ib_pd *pd, struct ib_udata *udata)
{
	struct sroce_mr *mr = to_smr(ibmr);
	struct sroce_rereg_mr req = { .lkey = ibmr->lkey, .flags = flags };
	int want = (flags & IB_MR_REREG_ACCESS) ? access : mr->access;
	struct sroce_region *region = NULL;
	struct ib_umem *umem = NULL;
	struct sroce_kmr_ext ext = {};
	struct sroce_reg_mr_resp resp;
	int err;

	if (!mr->umem)
		return ERR_PTR(-EOPNOTSUPP);
	if (flags & IB_MR_REREG_ACCESS) {
		if (access & ~SROCE_MR_ACCESS)
			return ERR_PTR(-EOPNOTSUPP);
		req.access = access;
	}
	if (flags & IB_MR_REREG_TRANS) {
		if (!length ||
		    length > to_sdev(ibmr->device)->limits.max_mr_size)
			return ERR_PTR(-EINVAL);
		req.addr = start;
		req.length = length;
		req.iova = iova;
		err = sroce_mr_pin(mr->uctx, ibmr->device, start, length, want,
				   &umem, &region, &ext);
		if (err)
			return ERR_PTR(err);
	} else if (!mr->umem->writable &&
		   (want & (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			    IB_ACCESS_REMOTE_ATOMIC))) {
		return ERR_PTR(-EOPNOTSUPP);
	}
	if (flags & IB_MR_REREG_PD)
		req.pd = to_spd(pd)->handle;
	err = sroce_ucall(mr->uctx, SROCE_OP_REREG_MR, &req, sizeof(req),
			  region ? &ext : NULL, region ? sizeof(ext) : 0,
			  &resp, sizeof(resp));
	if (!err && (resp.lkey != ibmr->lkey || resp.rkey != ibmr->rkey)) {
		/* sroced changed the keys: it is not the rereg it should be */
		pr_warn_ratelimited("%s: rereg changed the keys of MR 0x%x\n",
				    SROCE_DRV_NAME, ibmr->lkey);
		err = -EPROTO;
	}
	if (err) {
		if (region)
			sroce_mr_unpin(mr->uctx, umem, region);
		return ERR_PTR(err);
	}
	if (region) {
		sroce_mr_unpin(mr->uctx, mr->umem, mr->region);
		mr->umem = umem;
		mr->region = region;
	}
	mr->access = want;
	return NULL;
}

int sroce_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct sroce_mr *mr = to_smr(ibmr);
	struct sroce_handle_req req = { .handle = ibmr->lkey };
	struct page **pages;
	int err;

	if (mr->umem) {
		/* sroced answers once it no longer touches the pages; then
		 * its mappings are zapped and the pin released. Given up on
		 * (timeout, fatal signal) the same happens at once: the request
		 * stays queued, and until sroced handles it its accesses fault
		 * in the channel's scratch page (sroce_chan_fault), not in
		 * pages the application has back. EBUSY: memory windows are
		 * still bound to it (as rxe refuses): the MR stays whole;
		 * uverbs retries it at close after the windows.
		 */
		err = sroce_ucall(mr->uctx, SROCE_OP_DEREG_MR, &req, sizeof(req),
				  NULL, 0, NULL, 0);
		if (err == -EBUSY)
			return err;
		pages = mr->region->pages;
		sroce_chan_del_region(mr->uctx->chan, mr->region);
		kvfree(pages);
		ib_umem_release(mr->umem);
	}
	kfree(mr);
	sroce_live_dec(SROCE_OBJ_MR);
	return 0;
}
