// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The control channel to sroced: the misc device /dev/sroce.
 *
 * sroced opens it, binds it to a device (SROCE_KIOC_ATTACH), then read()s
 * requests and notifications and write()s replies and events, one message
 * per system call, each behind a struct sroce_kmsg (sroce_abi.h). It mmap()s
 * the rings and the MRs the requests name.
 *
 * A verb that needs sroced (sroce_call) queues its request and sleeps until
 * the reply, the timeout (call_timeout_ms), a fatal signal or the daemon's
 * death. Calls live on the caller's stack; the channel lock decides who
 * finishes them. A call given up (timeout, signal) leaves nothing the daemon
 * could trip on: an unread request is withdrawn, except a destroy, which
 * stays queued so the daemon still drops the object; a late reply finds no
 * call and is dropped; the caller cleans up what the daemon may have made
 * (an abandoned HELLO queues a CLOSE); and the daemon's stale mappings of MR
 * pages released meanwhile fault in a scratch page, never SIGBUS
 * (sroce_chan_fault).
 *
 * Lock order: mmap_lock -> regions_rwsem; chan->lock and sdev->chan_lock
 * are never held together.
 */
#include <linux/eventfd.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "sroce.h"

#define SROCE_OUTQ_MAX 65536	/* notifications beyond this are dropped */

struct sroce_msg {
	struct list_head node;
	struct sroce_call *call;	/* request: its call, while queued */
	u16 len;
	u8 data[];			/* struct sroce_kmsg + payload */
};

struct sroce_call {
	struct list_head node;		/* on chan->pending */
	struct completion done;
	struct sroce_msg *msg;		/* still queued for read() */
	u64 seq;
	u16 op;
	bool finished;
	int status;
	void *resp;
	u16 rlen;
};

struct sroce_chan {
	struct kref ref;
	spinlock_t lock;		/* everything below but regions */
	struct sroce_dev *dev;		/* attached device; NULL once gone */
	bool attached;
	bool dead;			/* daemon gone or device gone */
	bool dev_gone;			/* read() returns 0 from now on */
	struct list_head outq;
	unsigned int outq_len;
	struct list_head pending;
	u64 seq;
	wait_queue_head_t wq;
	struct eventfd_ctx *doorbell;
	/* regions the daemon may map, by pgoff; see sroce_ring.c */
	struct rw_semaphore regions_rwsem;
	struct xarray regions;
	struct address_space *mapping;	/* the file's; NULL after release */
	struct page *scratch;		/* what a released MR's pages become */
	atomic64_t stale_replies;
	atomic64_t stale_faults;
};

static void sroce_chan_free(struct kref *ref)
{
	struct sroce_chan *chan = container_of(ref, struct sroce_chan, ref);

	WARN_ON(!xa_empty(&chan->regions));
	xa_destroy(&chan->regions);
	if (chan->scratch)
		__free_page(chan->scratch);
	if (chan->doorbell)
		eventfd_ctx_put(chan->doorbell);
	kfree(chan);
	sroce_live_dec(SROCE_OBJ_CHAN);
}

void sroce_chan_get(struct sroce_chan *chan)
{
	kref_get(&chan->ref);
}

void sroce_chan_put(struct sroce_chan *chan)
{
	kref_put(&chan->ref, sroce_chan_free);
}

/* The attached daemon's channel (a reference), or NULL. */
struct sroce_chan *sroce_dev_chan(struct sroce_dev *sdev)
{
	struct sroce_chan *chan;
	unsigned long flags;

	spin_lock_irqsave(&sdev->chan_lock, flags);
	chan = sdev->chan;
	if (chan)
		sroce_chan_get(chan);
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	return chan;
}

bool sroce_chan_alive(struct sroce_chan *chan)
{
	return !READ_ONCE(chan->dead);
}

void sroce_chan_doorbell(struct sroce_chan *chan)
{
	if (chan->doorbell && !READ_ONCE(chan->dead))
		eventfd_signal(chan->doorbell, 1);
}

static bool sroce_is_destroy(u16 op)
{
	switch (op) {
	case SROCE_OP_DEALLOC_PD:
	case SROCE_OP_DEREG_MR:
	case SROCE_OP_DESTROY_CQ:
	case SROCE_OP_DESTROY_QP:
	case SROCE_OP_DESTROY_SRQ:
	case SROCE_OP_DESTROY_AH:
	case SROCE_OP_DEALLOC_MW:
		return true;
	default:
		return false;
	}
}

static struct sroce_msg *sroce_msg_alloc(u32 kind, u32 ctx, size_t plen,
					 gfp_t gfp)
{
	struct sroce_msg *m;
	struct sroce_kmsg *km;

	m = kmalloc(struct_size(m, data, sizeof(*km) + plen), gfp);
	if (!m)
		return NULL;
	m->call = NULL;
	m->len = sizeof(*km) + plen;
	km = (struct sroce_kmsg *)m->data;
	km->kind = kind;
	km->ctx = ctx;
	return m;
}

/* Fails every call in flight; chan->lock held. */
static void sroce_fail_calls_locked(struct sroce_chan *chan)
{
	struct sroce_call *call, *tmp;
	struct sroce_msg *m, *mtmp;

	list_for_each_entry_safe(m, mtmp, &chan->outq, node) {
		list_del(&m->node);
		if (m->call)
			m->call->msg = NULL;
		kfree(m);
	}
	chan->outq_len = 0;
	list_for_each_entry_safe(call, tmp, &chan->pending, node) {
		list_del(&call->node);
		call->finished = true;
		call->status = -EIO;
		complete(&call->done);
	}
}

int sroce_call(struct sroce_chan *chan, u32 ctx, u16 op,
	       const void *body, u16 blen, const void *ext, u16 elen,
	       void *resp, u16 rlen)
{
	struct sroce_call call = { .op = op, .resp = resp, .rlen = rlen };
	struct sroce_msg_hdr *h;
	struct sroce_msg *m;
	unsigned long timeout = msecs_to_jiffies(sroce_call_timeout_ms);
	long left;

	if (sizeof(*h) + blen + elen > SROCE_MAX_MSG)
		return -EMSGSIZE;
	m = sroce_msg_alloc(SROCE_KMSG_REQUEST, ctx,
			    sizeof(*h) + blen + elen, GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	h = (struct sroce_msg_hdr *)(m->data + sizeof(struct sroce_kmsg));
	memset(h, 0, sizeof(*h));
	h->magic = SROCE_ABI_MAGIC;
	h->op = op;
	h->len = blen + elen;
	if (blen)
		memcpy(h + 1, body, blen);
	if (elen)
		memcpy((u8 *)(h + 1) + blen, ext, elen);
	init_completion(&call.done);

	spin_lock(&chan->lock);
	if (chan->dead) {
		spin_unlock(&chan->lock);
		kfree(m);
		return -EIO;
	}
	call.seq = ++chan->seq;
	h->seq = call.seq;
	if (sroce_is_destroy(op) && (current->flags & PF_EXITING)) {
		/* A dying process's objects (its fatal signal is already
		 * taken, so a killable wait would sit out the timeout under a
		 * stopped daemon): queued, not waited for; the daemon drops
		 * them in order, before the context's CLOSE.
		 */
		list_add_tail(&m->node, &chan->outq);
		chan->outq_len++;
		spin_unlock(&chan->lock);
		wake_up_interruptible(&chan->wq);
		return 0;
	}
	m->call = &call;
	call.msg = m;
	list_add_tail(&m->node, &chan->outq);
	chan->outq_len++;
	list_add_tail(&call.node, &chan->pending);
	spin_unlock(&chan->lock);
	wake_up_interruptible(&chan->wq);

	/* Killable, destroys too: what the module releases after a destroy
	 * stays safe for a daemon that has not seen it yet (see the top).
	 */
	left = wait_for_completion_killable_timeout(&call.done, timeout);

	spin_lock(&chan->lock);
	if (!call.finished) {
		list_del(&call.node);
		if (call.msg && sroce_is_destroy(op)) {
			call.msg->call = NULL;	/* the daemon still drops it */
		} else if (call.msg) {
			list_del(&call.msg->node);
			chan->outq_len--;
			kfree(call.msg);
		}
		call.status = left ? -EINTR : -ETIMEDOUT;
	}
	spin_unlock(&chan->lock);
	if (call.status == -ETIMEDOUT)
		pr_warn_ratelimited("%s: sroced did not answer op %u within %u ms\n",
				    SROCE_DRV_NAME, op, sroce_call_timeout_ms);
	return call.status;
}

int sroce_notify(struct sroce_chan *chan, u32 kind, u32 ctx,
		 const void *a, u16 alen, const void *b, u16 blen, gfp_t gfp)
{
	struct sroce_msg *m;
	unsigned long flags;
	u8 *p;

	m = sroce_msg_alloc(kind, ctx, alen + blen, gfp);
	if (!m)
		return -ENOMEM;
	p = m->data + sizeof(struct sroce_kmsg);
	if (alen)
		memcpy(p, a, alen);
	if (blen)
		memcpy(p + alen, b, blen);
	spin_lock_irqsave(&chan->lock, flags);
	/* A CLOSE is never dropped (one per context): a context the daemon
	 * kept would hold its objects and its id.
	 */
	if (chan->dead ||
	    (kind != SROCE_KMSG_CLOSE && chan->outq_len >= SROCE_OUTQ_MAX)) {
		int err = chan->dead ? -EIO : -ENOBUFS;

		spin_unlock_irqrestore(&chan->lock, flags);
		kfree(m);
		return err;
	}
	list_add_tail(&m->node, &chan->outq);
	chan->outq_len++;
	spin_unlock_irqrestore(&chan->lock, flags);
	wake_up_interruptible(&chan->wq);
	return 0;
}

int sroce_chan_add_region(struct sroce_chan *chan, struct sroce_region *r)
{
	return xa_insert(&chan->regions, r->pgoff, r, GFP_KERNEL);
}

/*
 * Takes a region away from the daemon. MR pages are mapped by PFN (they
 * are the application's anonymous pages), so the daemon's PTEs are zapped
 * before the pages are unpinned; ring pages are refcounted by the mapping.
 */
void sroce_chan_del_region(struct sroce_chan *chan, struct sroce_region *r)
{
	down_write(&chan->regions_rwsem);
	xa_erase(&chan->regions, r->pgoff);
	if (chan->mapping && r->pages)
		unmap_mapping_range(chan->mapping,
				    (loff_t)r->pgoff << PAGE_SHIFT, r->bytes, 1);
	up_write(&chan->regions_rwsem);
	sroce_region_free(r);
}

static int sroce_chan_open(struct inode *inode, struct file *f)
{
	struct sroce_chan *chan;

	if (!capable(CAP_NET_ADMIN))
		return -EPERM;
	chan = kzalloc(sizeof(*chan), GFP_KERNEL);
	if (!chan)
		return -ENOMEM;
	chan->scratch = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!chan->scratch) {
		kfree(chan);
		return -ENOMEM;
	}
	kref_init(&chan->ref);
	spin_lock_init(&chan->lock);
	INIT_LIST_HEAD(&chan->outq);
	INIT_LIST_HEAD(&chan->pending);
	init_waitqueue_head(&chan->wq);
	init_rwsem(&chan->regions_rwsem);
	xa_init(&chan->regions);
	chan->mapping = f->f_mapping;
	f->private_data = chan;
	sroce_live_inc(SROCE_OBJ_CHAN);
	return nonseekable_open(inode, f);
}

/* Pins the attached device's memory for the caller (put_device). */
static struct sroce_dev *sroce_chan_dev(struct sroce_chan *chan)
{
	struct sroce_dev *sdev;

	spin_lock(&chan->lock);
	sdev = chan->dev;
	if (sdev)
		get_device(&sdev->ib.dev);
	spin_unlock(&chan->lock);
	return sdev;
}

/* The daemon closed the channel (exit or crash). */
static int sroce_chan_release(struct inode *inode, struct file *f)
{
	struct sroce_chan *chan = f->private_data;
	struct sroce_dev *sdev;
	unsigned long flags;
	bool was;

	spin_lock(&chan->lock);
	chan->dead = true;
	sroce_fail_calls_locked(chan);
	sdev = chan->dev;
	if (sdev)
		get_device(&sdev->ib.dev);
	spin_unlock(&chan->lock);

	down_write(&chan->regions_rwsem);
	chan->mapping = NULL;	/* the file's mappings are all gone */
	up_write(&chan->regions_rwsem);

	if (sdev) {
		spin_lock_irqsave(&sdev->chan_lock, flags);
		was = sdev->chan == chan;
		if (was)
			sdev->chan = NULL;
		spin_unlock_irqrestore(&sdev->chan_lock, flags);
		if (was) {
			dev_info(&sdev->ib.dev, "sroced detached\n");
			sroce_daemon_gone(sdev, chan);
			sroce_chan_put(chan);	/* sdev->chan's */
		}
		put_device(&sdev->ib.dev);
	}
	sroce_chan_put(chan);
	return 0;
}

/* ops.dealloc_driver: the device is going away under an attached daemon. */
void sroce_chan_device_gone(struct sroce_dev *sdev)
{
	struct sroce_chan *chan;
	unsigned long flags;

	spin_lock_irqsave(&sdev->chan_lock, flags);
	chan = sdev->chan;
	sdev->chan = NULL;
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	if (!chan)
		return;
	spin_lock(&chan->lock);
	chan->dev = NULL;
	chan->dead = true;
	chan->dev_gone = true;
	sroce_fail_calls_locked(chan);
	spin_unlock(&chan->lock);
	wake_up_interruptible(&chan->wq);
	sroce_chan_put(chan);
}

static long sroce_chan_attach(struct sroce_chan *chan,
			      struct sroce_kattach __user *uarg)
{
	struct eventfd_ctx *db = NULL;
	struct sroce_kattach a;
	struct sroce_dev *sdev;
	unsigned long flags;
	bool busy;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.abi_version != SROCE_KABI_VERSION)
		return -EPROTONOSUPPORT;
	a.ibdev[sizeof(a.ibdev) - 1] = 0;
	if (a.attr.max_qp == 0 || a.attr.max_cqe == 0 || a.attr.max_qp_wr == 0 ||
	    a.attr.max_sge == 0 || a.attr.phys_port_cnt > 1)
		return -EINVAL;
	if (READ_ONCE(chan->attached))
		return -EBUSY;
	sdev = sroce_dev_get_by_name(a.ibdev);
	if (!sdev)
		return -ENODEV;
	if (a.doorbell_fd >= 0) {
		db = eventfd_ctx_fdget(a.doorbell_fd);
		if (IS_ERR(db)) {
			sroce_dev_put(sdev);
			return PTR_ERR(db);
		}
	}
	spin_lock(&chan->lock);
	busy = chan->attached;
	if (!busy) {
		chan->attached = true;
		chan->dev = sdev;
		chan->doorbell = db;
	}
	spin_unlock(&chan->lock);
	if (busy)
		goto err_busy;

	spin_lock_irqsave(&sdev->chan_lock, flags);
	busy = sdev->chan;
	if (!busy) {
		sroce_chan_get(chan);
		sdev->chan = chan;
	}
	spin_unlock_irqrestore(&sdev->chan_lock, flags);
	if (busy) {
		spin_lock(&chan->lock);
		chan->attached = false;
		chan->dev = NULL;
		chan->doorbell = NULL;
		spin_unlock(&chan->lock);
		goto err_busy;
	}
	sroce_apply_limits(sdev, &a.attr);
	sroce_send_gid_table(sdev, chan);
	sroce_port_update(sdev);
	dev_info(&sdev->ib.dev, "sroced attached (pid %d)\n",
		 task_tgid_nr(current));
	sroce_dev_put(sdev);
	return 0;

err_busy:
	if (db)
		eventfd_ctx_put(db);
	sroce_dev_put(sdev);
	return -EBUSY;
}

static long sroce_chan_ioctl(struct file *f, unsigned int cmd,
			     unsigned long arg)
{
	switch (cmd) {
	case SROCE_KIOC_ATTACH:
		return sroce_chan_attach(f->private_data, (void __user *)arg);
	default:
		return -ENOTTY;
	}
}

static bool sroce_chan_readable(struct sroce_chan *chan)
{
	return !list_empty_careful(&chan->outq) || READ_ONCE(chan->dev_gone);
}

static ssize_t sroce_chan_read(struct file *f, char __user *buf, size_t count,
			       loff_t *ppos)
{
	struct sroce_chan *chan = f->private_data;
	struct sroce_msg *m;
	ssize_t ret;
	int err;

	if (!READ_ONCE(chan->attached))
		return -ENOTCONN;
	for (;;) {
		spin_lock(&chan->lock);
		m = list_first_entry_or_null(&chan->outq, struct sroce_msg,
					     node);
		if (m) {
			if (count < m->len) {
				spin_unlock(&chan->lock);
				return -EMSGSIZE;
			}
			list_del(&m->node);
			chan->outq_len--;
			if (m->call)
				m->call->msg = NULL;
			spin_unlock(&chan->lock);
			break;
		}
		err = chan->dev_gone;
		spin_unlock(&chan->lock);
		if (err)
			return 0;
		if (f->f_flags & O_NONBLOCK)
			return -EAGAIN;
		err = wait_event_interruptible(chan->wq,
					       sroce_chan_readable(chan));
		if (err)
			return err;
	}
	/* A request lost here (bad buffer) times out in its caller. */
	ret = copy_to_user(buf, m->data, m->len) ? -EFAULT : m->len;
	kfree(m);
	return ret;
}

static int sroce_chan_reply(struct sroce_chan *chan, const u8 *p, size_t len)
{
	const struct sroce_msg_hdr *h = (const void *)p;
	struct sroce_call *call, *found = NULL;
	size_t body;

	if (len < sizeof(*h) || h->magic != SROCE_ABI_MAGIC ||
	    h->len != len - sizeof(*h))
		return -EINVAL;
	body = h->len;
	spin_lock(&chan->lock);
	list_for_each_entry(call, &chan->pending, node) {
		if (call->seq == h->seq) {
			found = call;
			break;
		}
	}
	if (!found || found->msg) {
		/* Timed out meanwhile (or never read): not an error. */
		spin_unlock(&chan->lock);
		atomic64_inc(&chan->stale_replies);
		return 0;
	}
	if (h->op != found->op) {
		spin_unlock(&chan->lock);
		return -EINVAL;
	}
	list_del(&found->node);
	found->finished = true;
	if (h->status > 0 || h->status < -MAX_ERRNO)
		found->status = -EPROTO;
	else if (h->status == 0 && body < found->rlen)
		found->status = -EPROTO;	/* short answer */
	else
		found->status = h->status;
	if (found->status == 0 && found->rlen)
		memcpy(found->resp, h + 1, found->rlen);
	complete(&found->done);
	spin_unlock(&chan->lock);
	return 0;
}

static int sroce_chan_event(struct sroce_chan *chan, u32 kind, const u8 *p,
			    size_t len)
{
	const struct sroce_kgsi *gsi = (const void *)p;
	struct sroce_dev *sdev;
	int err;

	switch (kind) {
	case SROCE_KMSG_COMP_EVENT:
		if (len != sizeof(struct sroce_comp_event_desc))
			return -EINVAL;
		break;
	case SROCE_KMSG_ASYNC_EVENT:
		if (len != sizeof(struct sroce_async_event_desc))
			return -EINVAL;
		break;
	case SROCE_KMSG_GSI_RECV:
		if (len < sizeof(*gsi) || gsi->len > SROCE_KGSI_MAX_MAD ||
		    len != sizeof(*gsi) + gsi->len)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	sdev = sroce_chan_dev(chan);
	if (!sdev)
		return -ENODEV;
	if (kind == SROCE_KMSG_COMP_EVENT)
		err = sroce_comp_event(sdev, chan, (const void *)p);
	else if (kind == SROCE_KMSG_ASYNC_EVENT)
		err = sroce_async_event(sdev, chan, (const void *)p);
	else
		err = sroce_gsi_deliver(sdev, gsi, gsi + 1);
	put_device(&sdev->ib.dev);
	return err;
}

static ssize_t sroce_chan_write(struct file *f, const char __user *buf,
				size_t count, loff_t *ppos)
{
	struct sroce_chan *chan = f->private_data;
	const struct sroce_kmsg *km;
	u8 *kbuf;
	int err;

	if (!READ_ONCE(chan->attached))
		return -ENOTCONN;
	if (count < sizeof(*km) || count > SROCE_KMSG_MAX)
		return -EINVAL;
	kbuf = memdup_user(buf, count);
	if (IS_ERR(kbuf))
		return PTR_ERR(kbuf);
	km = (const void *)kbuf;
	if (km->kind == SROCE_KMSG_REPLY)
		err = sroce_chan_reply(chan, kbuf + sizeof(*km),
				       count - sizeof(*km));
	else
		err = sroce_chan_event(chan, km->kind, kbuf + sizeof(*km),
				       count - sizeof(*km));
	kfree(kbuf);
	return err ? err : count;
}

static __poll_t sroce_chan_poll(struct file *f, poll_table *wait)
{
	struct sroce_chan *chan = f->private_data;
	__poll_t mask = EPOLLOUT | EPOLLWRNORM;

	poll_wait(f, &chan->wq, wait);
	if (!list_empty_careful(&chan->outq))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(chan->dev_gone))
		mask |= EPOLLHUP | EPOLLIN;
	return mask;
}

static vm_fault_t sroce_chan_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct sroce_chan *chan = vma->vm_private_data;
	struct sroce_region *r;
	vm_fault_t ret;

	down_read(&chan->regions_rwsem);
	r = xa_load(&chan->regions, vma->vm_pgoff);
	if (r) {
		ret = sroce_region_fault(r, vmf);
	} else if (vma->vm_flags & VM_PFNMAP) {
		/* An MR released while the daemon still maps it: it has not
		 * yet handled the DEREG_MR (given up on timeout or a signal) or
		 * the REG_MR whose caller left. Its accesses land in the
		 * channel's scratch page: never the application's pages (no
		 * longer pinned) and never a SIGBUS that kills the daemon.
		 */
		atomic64_inc(&chan->stale_faults);
		ret = vmf_insert_pfn(vma, vmf->address,
				     page_to_pfn(chan->scratch));
	} else {
		ret = VM_FAULT_SIGBUS;
	}
	up_read(&chan->regions_rwsem);
	return ret;
}

/* A region is mapped whole or not at all (fault finds it by vm_pgoff). */
static int sroce_chan_may_split(struct vm_area_struct *vma,
				unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct sroce_chan_vm_ops = {
	.fault = sroce_chan_fault,
	.may_split = sroce_chan_may_split,
};

static int sroce_chan_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct sroce_chan *chan = f->private_data;
	struct sroce_region *r;
	int err;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	down_read(&chan->regions_rwsem);
	r = xa_load(&chan->regions, vma->vm_pgoff);
	if (!r) {
		err = -EINVAL;
	} else {
		vma->vm_ops = &sroce_chan_vm_ops;
		vma->vm_private_data = chan;
		err = sroce_region_mmap(r, vma);
	}
	up_read(&chan->regions_rwsem);
	return err;
}

static const struct file_operations sroce_chan_fops = {
	.owner = THIS_MODULE,
	.open = sroce_chan_open,
	.release = sroce_chan_release,
	.read = sroce_chan_read,
	.write = sroce_chan_write,
	.poll = sroce_chan_poll,
	.unlocked_ioctl = sroce_chan_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = sroce_chan_mmap,
	.llseek = no_llseek,
};

static struct miscdevice sroce_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "sroce",
	.fops = &sroce_chan_fops,
	.mode = 0600,
};

int sroce_chan_init(void)
{
	return misc_register(&sroce_misc);
}

void sroce_chan_exit(void)
{
	misc_deregister(&sroce_misc);
}
