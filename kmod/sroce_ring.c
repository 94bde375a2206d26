// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Rings shared by three parties, and what sroced may map.
 *
 * A ring (sroce_abi.h: struct sroce_ring, then entries 64-byte aligned) is
 * vmalloc_user memory owned by the module. The provider maps it through the
 * uverbs fd (an rdma_user_mmap_entry), sroced through the channel (a
 * region). Both mappings take page references, so freeing the ring while a
 * side still has it mapped leaves that side valid memory, never freed pages.
 *
 * MR regions hold the application's pinned pages. Those are anonymous pages,
 * which vm_insert_page refuses, so they are inserted by PFN on fault and the
 * channel zaps them before the MR releases its pin (sroce_chan_del_region).
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "sroce.h"

/* pgoffs are never reused, so a stale daemon mapping can never see another
 * region's pages; one guard page separates neighbours.
 */
static atomic64_t sroce_next_pgoff = ATOMIC64_INIT(1);

unsigned long sroce_ring_entries_offset(void)
{
	return ALIGN(sizeof(struct sroce_ring), 64);
}

void sroce_ring_init(void *at, u32 size, u32 entry_size)
{
	struct sroce_ring *hdr = at;

	memset(hdr, 0, sizeof(*hdr));
	hdr->size = size;
	hdr->entry_size = entry_size;
}

/* Device fatal (IBA 11.6.2): tells the provider nothing will complete. */
void sroce_ring_set_error(struct sroce_rbuf *ring, size_t offset)
{
	struct sroce_ring *hdr = ring->vaddr + offset;

	/* release: the provider acquires `error`, then reads the ring */
	smp_store_release(&hdr->error, 1);
}

void sroce_ring_kmap(struct sroce_rbuf *ring, struct sroce_kmap *map)
{
	map->offset = (u64)ring->region->pgoff << PAGE_SHIFT;
	map->bytes = ring->bytes;
}

struct sroce_region *sroce_region_new(size_t bytes, bool writable)
{
	struct sroce_region *r;

	bytes = PAGE_ALIGN(bytes);
	if (!bytes || bytes >> PAGE_SHIFT >= 1UL << 32)
		return NULL;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->bytes = bytes;
	r->writable = writable;
	r->npages = bytes >> PAGE_SHIFT;
	r->pgoff = atomic64_fetch_add(r->npages + 1, &sroce_next_pgoff);
	sroce_live_inc(SROCE_OBJ_REGION);
	return r;
}

void sroce_region_free(struct sroce_region *r)
{
	kfree(r);
	sroce_live_dec(SROCE_OBJ_REGION);
}

/* chan->regions_rwsem held for reading, mmap_lock for writing. */
int sroce_region_mmap(struct sroce_region *r, struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != r->bytes)
		return -EINVAL;
	if (!r->writable) {
		if (vma->vm_flags & VM_WRITE)
			return -EACCES;
		vma->vm_flags &= ~VM_MAYWRITE;
	}
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY;
	if (r->vaddr)
		return remap_vmalloc_range(vma, r->vaddr, 0);
	vma->vm_flags |= VM_PFNMAP | VM_IO;
	return 0;
}

/* chan->regions_rwsem held for reading: the pin cannot go away meanwhile. */
vm_fault_t sroce_region_fault(struct sroce_region *r, struct vm_fault *vmf)
{
	unsigned long idx = vmf->pgoff - vmf->vma->vm_pgoff;

	if (!r->pages || idx >= r->npages)
		return VM_FAULT_SIGBUS;
	return vmf_insert_pfn(vmf->vma, vmf->address,
			      page_to_pfn(r->pages[idx]));
}

struct sroce_rbuf *sroce_ring_alloc(struct sroce_ucontext *uctx, size_t bytes)
{
	struct sroce_rbuf *ring;
	int err = -ENOMEM;

	ring = kzalloc(sizeof(*ring), GFP_KERNEL);
	if (!ring)
		return ERR_PTR(-ENOMEM);
	ring->bytes = PAGE_ALIGN(bytes);
	ring->vaddr = vmalloc_user(ring->bytes);
	if (!ring->vaddr)
		goto err_free;
	ring->region = sroce_region_new(ring->bytes, true);
	if (!ring->region)
		goto err_vfree;
	ring->region->vaddr = ring->vaddr;
	err = sroce_chan_add_region(uctx->chan, ring->region);
	if (err)
		goto err_region;
	err = rdma_user_mmap_entry_insert(&uctx->ibuc, &ring->rdma, ring->bytes);
	if (err)
		goto err_del;
	sroce_live_inc(SROCE_OBJ_RING);
	return ring;

err_del:
	sroce_chan_del_region(uctx->chan, ring->region);
	goto err_vfree;
err_region:
	sroce_region_free(ring->region);
err_vfree:
	vfree(ring->vaddr);
err_free:
	kfree(ring);
	return ERR_PTR(err);
}

/* The memory itself goes in sroce_mmap_free, once uverbs lets go. */
void sroce_ring_free(struct sroce_ucontext *uctx, struct sroce_rbuf *ring)
{
	sroce_chan_del_region(uctx->chan, ring->region);
	ring->region = NULL;
	rdma_user_mmap_entry_remove(&ring->rdma);
}

int sroce_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *entry;
	struct sroce_rbuf *ring;
	int err;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	entry = rdma_user_mmap_entry_get(ibuc, vma);
	if (!entry)
		return -EINVAL;
	ring = container_of(entry, struct sroce_rbuf, rdma);
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	err = remap_vmalloc_range(vma, ring->vaddr, 0);
	rdma_user_mmap_entry_put(entry);
	return err;
}

void sroce_mmap_free(struct rdma_user_mmap_entry *entry)
{
	struct sroce_rbuf *ring = container_of(entry, struct sroce_rbuf, rdma);

	vfree(ring->vaddr);
	kfree(ring);
	sroce_live_dec(SROCE_OBJ_RING);
}
