// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The netdev side of a device: port attributes, the GUID, and the RoCE GID
 * table, which ib_core builds from the interface's addresses and the module
 * mirrors to sroced (sroced resolves sgid_index with it).
 */
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>

#include "sroce.h"

/* EUI-64 from the MAC (IBA 4.1.1 node GUID), as for any RoCE device. */
void sroce_set_guid(struct sroce_dev *sdev)
{
	addrconf_addr_eui48((unsigned char *)&sdev->ib.node_guid,
			    sdev->ndev->dev_addr);
}

/*
 * ACTIVE needs both a usable interface and an attached sroced: without the
 * daemon nothing can be transmitted, and a DOWN port tells programs so.
 */
enum ib_port_state sroce_port_state(struct sroce_dev *sdev)
{
	struct sroce_chan *chan = sroce_dev_chan(sdev);
	bool daemon = chan && sroce_chan_alive(chan);

	if (chan)
		sroce_chan_put(chan);
	if (daemon && netif_running(sdev->ndev) && netif_oper_up(sdev->ndev))
		return IB_PORT_ACTIVE;
	return IB_PORT_DOWN;
}

/* Reports a change of the port state once (IBA 11.6.3 port events). */
void sroce_port_update(struct sroce_dev *sdev)
{
	int active = sroce_port_state(sdev) == IB_PORT_ACTIVE;
	struct ib_event ev = {
		.device = &sdev->ib,
		.element.port_num = SROCE_PORT,
	};

	if (atomic_xchg(&sdev->port_active, active) == active)
		return;
	ev.event = active ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR;
	ib_dispatch_event(&ev);
}

int sroce_query_port(struct ib_device *ib, u32 port, struct ib_port_attr *attr)
{
	struct sroce_dev *sdev = to_sdev(ib);
	enum ib_mtu mtu;
	int err;

	/* ib_query_port cleared attr */
	attr->state = sroce_port_state(sdev);
	attr->phys_state = attr->state == IB_PORT_ACTIVE ?
		IB_PORT_PHYS_STATE_LINK_UP : IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	/* Room for the RoCEv2 headers (IP, UDP, BTH, ext., ICRC) in the MTU */
	mtu = iboe_get_mtu(READ_ONCE(sdev->ndev->mtu));
	attr->active_mtu = mtu ? min(mtu, IB_MTU_4096) : IB_MTU_256;
	attr->gid_tbl_len = SROCE_GID_TBL_LEN;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = 1U << 31;
	attr->pkey_tbl_len = 1;
	attr->max_vl_num = 1;
	err = ib_get_eth_speed(ib, port, &attr->active_speed,
			       &attr->active_width);
	return err;
}

static void sroce_gid_msg(struct sroce_chan *chan, const union ib_gid *gid,
			  u32 index, u32 type, bool present)
{
	struct sroce_kgid m = {};

	memcpy(m.entry.gid, gid->raw, sizeof(m.entry.gid));
	m.entry.index = index;
	m.entry.gid_type = type == IB_GID_TYPE_ROCE_UDP_ENCAP ? 1 : 0;
	m.present = present;
	sroce_notify(chan, SROCE_KMSG_GID, 0, &m, sizeof(m), NULL, 0,
		     GFP_ATOMIC);
}

static int sroce_gid_change(const struct ib_gid_attr *attr, bool present)
{
	struct sroce_chan *chan = sroce_dev_chan(to_sdev(attr->device));

	if (chan) {
		sroce_gid_msg(chan, &attr->gid, attr->index, attr->gid_type,
			      present);
		sroce_chan_put(chan);
	}
	return 0;
}

int sroce_add_gid(const struct ib_gid_attr *attr, void **context)
{
	return sroce_gid_change(attr, true);
}

int sroce_del_gid(const struct ib_gid_attr *attr, void **context)
{
	return sroce_gid_change(attr, false);
}

/* At attach: the whole table, so the daemon starts from the kernel's. */
void sroce_send_gid_table(struct sroce_dev *sdev, struct sroce_chan *chan)
{
	const struct ib_gid_attr *attr;
	int i;

	for (i = 0; i < SROCE_GID_TBL_LEN; i++) {
		attr = rdma_get_gid_attr(&sdev->ib, SROCE_PORT, i);
		if (IS_ERR(attr))
			continue;
		sroce_gid_msg(chan, &attr->gid, attr->index, attr->gid_type,
			      true);
		rdma_put_gid_attr(attr);
	}
}
