// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The module, "rdma link add NAME type sroce netdev IFACE", and the lifetime
 * of a device: registration, the netdev going away, unload.
 */
#include <linux/module.h>
#include <linux/if_arp.h>
#include <linux/mutex.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/rdma_netlink.h>

#include "sroce.h"

unsigned int sroce_call_timeout_ms = 30000;
module_param_named(call_timeout_ms, sroce_call_timeout_ms, uint, 0644);
MODULE_PARM_DESC(call_timeout_ms,
		 "How long a verb waits for sroced's answer (ms, default 30000)");

atomic_t sroce_live[SROCE_OBJ_KINDS];

static LIST_HEAD(sroce_devices);
static DEFINE_MUTEX(sroce_devices_lock);
static bool sroce_exiting;		/* under sroce_devices_lock */
static struct workqueue_struct *sroce_wq;	/* device resets */

static struct sroce_dev *sroce_find_locked(const struct net_device *ndev)
{
	struct sroce_dev *sdev;

	list_for_each_entry(sdev, &sroce_devices, node)
		if (sdev->ndev == ndev)
			return sdev;
	return NULL;
}

/* For SROCE_KIOC_ATTACH: the device by name, registered (ib_device_try_get). */
struct sroce_dev *sroce_dev_get_by_name(const char *name)
{
	struct sroce_dev *sdev, *found = NULL;

	mutex_lock(&sroce_devices_lock);
	list_for_each_entry(sdev, &sroce_devices, node) {
		if (strcmp(sdev->ib.name, name))
			continue;
		if (ib_device_try_get(&sdev->ib))
			found = sdev;
		break;
	}
	mutex_unlock(&sroce_devices_lock);
	return found;
}

void sroce_dev_put(struct sroce_dev *sdev)
{
	ib_device_put(&sdev->ib);
}

/*
 * ops.dealloc_driver: the last step of unregistration (every client, uverbs
 * included, is gone) or the unwind of a failed registration.
 */
void sroce_dealloc_driver(struct ib_device *ib)
{
	struct sroce_dev *sdev = to_sdev(ib);

	sroce_chan_device_gone(sdev);
	mutex_lock(&sroce_devices_lock);
	list_del_init(&sdev->node);
	mutex_unlock(&sroce_devices_lock);
	WARN_ON(!xa_empty(&sdev->ctxs) || !xa_empty(&sdev->cqs) ||
		!xa_empty(&sdev->qps) || !xa_empty(&sdev->srqs));
	xa_destroy(&sdev->ctxs);
	xa_destroy(&sdev->cqs);
	xa_destroy(&sdev->qps);
	xa_destroy(&sdev->srqs);
	sroce_live_dec(SROCE_OBJ_DEV);
}

static int sroce_newlink(const char *ibdev_name, struct net_device *ndev)
{
	struct sroce_dev *sdev;
	int err;

	if (ndev->type != ARPHRD_ETHER && !(ndev->flags & IFF_LOOPBACK)) {
		pr_info("%s: %s is not an Ethernet interface\n",
			SROCE_DRV_NAME, ndev->name);
		return -EINVAL;
	}
	mutex_lock(&sroce_devices_lock);
	sdev = sroce_find_locked(ndev);
	mutex_unlock(&sroce_devices_lock);
	if (sdev) {
		pr_info("%s: %s already has %s\n", SROCE_DRV_NAME, ndev->name,
			sdev->ib.name);
		return -EEXIST;
	}

	sdev = ib_alloc_device(sroce_dev, ib);
	if (!sdev)
		return -ENOMEM;
	sroce_live_inc(SROCE_OBJ_DEV);
	INIT_LIST_HEAD(&sdev->node);
	sdev->ndev = ndev;
	spin_lock_init(&sdev->chan_lock);
	xa_init_flags(&sdev->ctxs, XA_FLAGS_ALLOC1);
	xa_init_flags(&sdev->cqs, XA_FLAGS_ALLOC1);
	xa_init_flags(&sdev->qps, XA_FLAGS_ALLOC1);
	xa_init_flags(&sdev->srqs, XA_FLAGS_ALLOC1);
	sroce_default_limits(&sdev->limits);

	ib_set_device_ops(&sdev->ib, &sroce_dev_ops);
	sdev->ib.node_type = RDMA_NODE_IB_CA;
	sdev->ib.phys_port_cnt = 1;
	sdev->ib.num_comp_vectors = 1;
	sdev->ib.local_dma_lkey = 0;
	/* Fast-path commands uverbs only allows when asked: the provider's
	 * doorbells are POST_SEND / POST_RECV / POST_SRQ_RECV without work
	 * requests, and REQ_NOTIFY_CQ arms a ring from the kernel side.
	 */
	sdev->ib.uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				    BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				    BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
				    BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	strscpy(sdev->ib.node_desc, "sroce", sizeof(sdev->ib.node_desc));
	sroce_set_guid(sdev);
	/* The netdev's parent, so that rdma_cm and tools find the interface
	 * under device/net/ (a veth has none, which is fine).
	 */
	sdev->ib.dev.parent = ndev->dev.parent;

	err = ib_device_set_netdev(&sdev->ib, ndev, SROCE_PORT);
	if (err)
		goto err_dealloc;
	/* No DMA device: ib_core then gives kernel users virtual addresses. */
	err = ib_register_device(&sdev->ib, ibdev_name, NULL);
	if (err)
		goto err_dealloc;
	mutex_lock(&sroce_devices_lock);
	list_add_tail(&sdev->node, &sroce_devices);
	mutex_unlock(&sroce_devices_lock);
	dev_info(&sdev->ib.dev, "added on %s\n", ndev->name);
	return 0;

err_dealloc:
	ib_dealloc_device(&sdev->ib);
	return err;
}

/*
 * The reset after sroced died under programs, as an RNIC's driver recovers
 * from a fatal error (mlx5: DEVICE_FATAL, then the device is unloaded and
 * loaded again): unregistration disassociates the programs (ib_uverbs:
 * their verbs fail with EIO, their mappings stay valid memory), rdma_cm
 * tells every connection RDMA_CM_EVENT_DEVICE_REMOVAL, which is what ends
 * a program waiting for a CM event (rping); then a fresh device of the same
 * name comes back on the interface for the next sroced.
 */
struct sroce_reset {
	struct work_struct work;
	struct sroce_dev *sdev;		/* get_device held */
	struct net_device *ndev;	/* dev_hold held */
	char name[IB_DEVICE_NAME_MAX];
};

static void sroce_reset_work(struct work_struct *work)
{
	struct sroce_reset *r = container_of(work, struct sroce_reset, work);
	bool again;
	int err;

	ib_unregister_device(&r->sdev->ib);
	put_device(&r->sdev->ib.dev);
	rtnl_lock();
	again = r->ndev->reg_state == NETREG_REGISTERED;
	rtnl_unlock();
	mutex_lock(&sroce_devices_lock);
	again = again && !sroce_exiting;
	mutex_unlock(&sroce_devices_lock);
	if (again) {
		err = sroce_newlink(r->name, r->ndev);
		if (err)
			pr_warn("%s: %s not added again on %s after reset: %d\n",
				SROCE_DRV_NAME, r->name, r->ndev->name, err);
		else
			pr_info("%s: %s reset after sroced's death\n",
				SROCE_DRV_NAME, r->name);
	}
	dev_put(r->ndev);
	kfree(r);
}

void sroce_dev_reset(struct sroce_dev *sdev)
{
	struct sroce_reset *r;

	if (atomic_xchg(&sdev->resetting, 1))
		return;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return;
	INIT_WORK(&r->work, sroce_reset_work);
	get_device(&sdev->ib.dev);
	r->sdev = sdev;
	dev_hold(sdev->ndev);
	r->ndev = sdev->ndev;
	strscpy(r->name, dev_name(&sdev->ib.dev), sizeof(r->name));
	/* Never queued once sroce_exit destroys the workqueue. */
	mutex_lock(&sroce_devices_lock);
	if (!sroce_exiting) {
		queue_work(sroce_wq, &r->work);
		r = NULL;
	}
	mutex_unlock(&sroce_devices_lock);
	if (r) {
		dev_put(r->ndev);
		put_device(&sdev->ib.dev);
		kfree(r);
	}
}

static struct rdma_link_ops sroce_link_ops = {
	.type = "sroce",
	.newlink = sroce_newlink,
};

static int sroce_netdev_event(struct notifier_block *nb, unsigned long event,
			      void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct sroce_dev *sdev;

	mutex_lock(&sroce_devices_lock);
	sdev = sroce_find_locked(ndev);
	if (!sdev || !ib_device_try_get(&sdev->ib)) {
		mutex_unlock(&sroce_devices_lock);
		return NOTIFY_DONE;
	}
	mutex_unlock(&sroce_devices_lock);

	switch (event) {
	case NETDEV_UNREGISTER:
		/* The netdev waits for our reference; unregister from a work
		 * item since we are under RTNL here.
		 */
		ib_unregister_device_queued(&sdev->ib);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		sroce_port_update(sdev);
		break;
	default:
		break;
	}
	ib_device_put(&sdev->ib);
	return NOTIFY_OK;
}

static struct notifier_block sroce_netdev_notifier = {
	.notifier_call = sroce_netdev_event,
};

static const char *const sroce_obj_names[SROCE_OBJ_KINDS] = {
	[SROCE_OBJ_DEV] = "devices",	[SROCE_OBJ_UCTX] = "contexts",
	[SROCE_OBJ_PD] = "PDs",		[SROCE_OBJ_AH] = "AHs",
	[SROCE_OBJ_MR] = "MRs",		[SROCE_OBJ_CQ] = "CQs",
	[SROCE_OBJ_QP] = "QPs",		[SROCE_OBJ_SRQ] = "SRQs",
	[SROCE_OBJ_RING] = "rings",	[SROCE_OBJ_REGION] = "regions",
	[SROCE_OBJ_CHAN] = "channels",	[SROCE_OBJ_MW] = "MWs",
};

static int __init sroce_init(void)
{
	int err;

	sroce_wq = alloc_ordered_workqueue("rdma_sroce", 0);
	if (!sroce_wq)
		return -ENOMEM;
	err = sroce_chan_init();
	if (err)
		goto err_wq;
	err = register_netdevice_notifier(&sroce_netdev_notifier);
	if (err) {
		sroce_chan_exit();
		goto err_wq;
	}
	rdma_link_register(&sroce_link_ops);
	pr_info("%s: loaded (abi %u, kernel abi %u)\n", SROCE_DRV_NAME,
		SROCE_ABI_VERSION, SROCE_KABI_VERSION);
	return 0;

err_wq:
	destroy_workqueue(sroce_wq);
	return err;
}

static void __exit sroce_exit(void)
{
	struct sroce_dev *sdev;
	int i;

	rdma_link_unregister(&sroce_link_ops);
	mutex_lock(&sroce_devices_lock);
	sroce_exiting = true;		/* a reset in flight adds nothing back */
	mutex_unlock(&sroce_devices_lock);
	destroy_workqueue(sroce_wq);
	for (;;) {
		mutex_lock(&sroce_devices_lock);
		sdev = list_first_entry_or_null(&sroce_devices,
						struct sroce_dev, node);
		if (sdev)
			get_device(&sdev->ib.dev);
		mutex_unlock(&sroce_devices_lock);
		if (!sdev)
			break;
		/* Also completes an unregistration queued by the notifier. */
		ib_unregister_device(&sdev->ib);
		put_device(&sdev->ib.dev);
	}
	unregister_netdevice_notifier(&sroce_netdev_notifier);
	sroce_chan_exit();
	for (i = 0; i < SROCE_OBJ_KINDS; i++)
		if (atomic_read(&sroce_live[i]))
			pr_err("%s: leak: %d %s still live at unload\n",
			       SROCE_DRV_NAME, atomic_read(&sroce_live[i]),
			       sroce_obj_names[i]);
	pr_info("%s: unloaded\n", SROCE_DRV_NAME);
}

module_init(sroce_init);
module_exit(sroce_exit);

MODULE_ALIAS_RDMA_LINK("sroce");
MODULE_DESCRIPTION("sroce: soft-RoCE device whose transport runs in sroced");
MODULE_AUTHOR("sroce developers");
MODULE_LICENSE("Dual MIT/GPL");
