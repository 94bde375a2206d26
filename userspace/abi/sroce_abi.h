/* SPDX-License-Identifier: MIT */
/*
 * The sroce ABI: what the rdma-core provider (libsroce), the daemon (sroced)
 * and the kernel module (rdma_sroce.ko) exchange (docs/provider.md,
 * docs/sroced.md, docs/kmod.md).
 *
 * Two paths, one set of operations. Without the module, the provider sends
 * them to sroced over a Unix SOCK_SEQPACKET socket (peer credentials checked
 * with SO_PEERCRED, file descriptors passed with SCM_RIGHTS). With the
 * module, applications use the kernel's uverbs; the module forwards each
 * command to sroced through its control channel (/dev/sroce, the
 * "kernel path" section below) as the same operation bodies, plus a kernel
 * extension where pinned pages or the module's rings are involved, and the
 * provider's driver data (sroce_ku*) carries the rings' mmap offsets. Every
 * field is fixed-width with explicit padding; sizes are pinned by the
 * static asserts at the end, so any layout change is a compile error.
 *
 * Data verbs never send messages: they go through shared-memory rings
 * (struct sroce_ring) with doorbells (an eventfd the daemon sleeps on when
 * idle, or a uverbs post with no work request on the kernel path).
 * Completions and events come back the same way.
 */
#ifndef SROCE_ABI_H
#define SROCE_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
typedef __u8 sroce_u8;
typedef __u16 sroce_u16;
typedef __u32 sroce_u32;
typedef __u64 sroce_u64;
typedef __s32 sroce_s32;
#else
#include <stdint.h>
#include <linux/ioctl.h>
typedef uint8_t sroce_u8;
typedef uint16_t sroce_u16;
typedef uint32_t sroce_u32;
typedef uint64_t sroce_u64;
typedef int32_t sroce_s32;
#endif

#define SROCE_ABI_VERSION 1
#define SROCE_ABI_MAGIC 0x53524f43u /* "SROC" */

/* Default control socket of a device: SROCE_RUN_DIR "/" DEVNAME ".sock". */
#define SROCE_RUN_DIR "/run/sroce"
#define SROCE_MAX_MSG 4096

/* ------------------------------------------------------------------------
 * Control messages. A request is a header plus the op's body; the reply
 * echoes op and seq, carries status (0 or -errno, the value the verb returns
 * to the application) and the reply body. Replies may carry fds
 * (SCM_RIGHTS) in the order the op documents.
 * ---------------------------------------------------------------------- */
enum sroce_op {
	SROCE_OP_HELLO = 1,        /* -> sroce_hello_resp; fds: async event socket */
	SROCE_OP_QUERY_DEVICE,     /* -> sroce_device_attr */
	SROCE_OP_QUERY_PORT,       /* sroce_query_port -> sroce_port_attr */
	SROCE_OP_QUERY_GID,        /* sroce_query_gid -> sroce_gid_entry */
	SROCE_OP_ALLOC_PD,         /* -> sroce_handle_resp */
	SROCE_OP_DEALLOC_PD,       /* sroce_handle_req */
	SROCE_OP_REG_MR,           /* sroce_reg_mr -> sroce_reg_mr_resp */
	SROCE_OP_DEREG_MR,         /* sroce_handle_req (handle = lkey) */
	SROCE_OP_CREATE_CQ,        /* sroce_create_cq -> sroce_create_cq_resp; fds: ring memfd */
	SROCE_OP_DESTROY_CQ,       /* sroce_handle_req */
	SROCE_OP_CREATE_QP,        /* sroce_create_qp -> sroce_create_qp_resp; fds: ring memfd */
	SROCE_OP_MODIFY_QP,        /* sroce_modify_qp */
	SROCE_OP_QUERY_QP,         /* sroce_handle_req -> sroce_qp_attr */
	SROCE_OP_DESTROY_QP,       /* sroce_handle_req -> sroce_destroy_qp_resp */
	SROCE_OP_CREATE_SRQ,       /* sroce_create_srq -> sroce_create_srq_resp; fds: ring memfd */
	SROCE_OP_MODIFY_SRQ,       /* sroce_modify_srq */
	SROCE_OP_QUERY_SRQ,        /* sroce_handle_req -> sroce_srq_attr */
	SROCE_OP_DESTROY_SRQ,      /* sroce_handle_req */
	SROCE_OP_CREATE_AH,        /* sroce_create_ah -> sroce_handle_resp */
	SROCE_OP_DESTROY_AH,       /* sroce_handle_req */
	SROCE_OP_CREATE_COMP_CHANNEL, /* -> sroce_handle_resp; fds: event fd (see below) */
	SROCE_OP_DESTROY_COMP_CHANNEL,/* sroce_handle_req */
	SROCE_OP_STATS,            /* -> JSON text (daemon tools: sroce status/qps/lanes) */
	SROCE_OP_REREG_MR,         /* sroce_rereg_mr -> sroce_reg_mr_resp (provider: ibv_rereg_mr) */
	SROCE_OP_RESIZE_CQ,        /* sroce_resize_cq -> sroce_create_cq_resp; fds: the new ring's memfd */
	SROCE_OP_ALLOC_MW,         /* sroce_alloc_mw -> sroce_alloc_mw_resp (ibv_alloc_mw) */
	SROCE_OP_DEALLOC_MW,       /* sroce_handle_req (ibv_dealloc_mw) */
	SROCE_OP_SHARE_MR,         /* sroce_share_mr; fds: the memfd backing part of the MR (socket path) */
	SROCE_OP_COUNT,
};

struct sroce_msg_hdr {
	sroce_u32 magic;  /* SROCE_ABI_MAGIC */
	sroce_u16 op;     /* enum sroce_op */
	sroce_u16 len;    /* bytes of body after this header */
	sroce_u64 seq;    /* echoed in the reply */
	sroce_s32 status; /* reply: 0 or -errno; request: 0 */
	sroce_u32 reserved;
};

struct sroce_handle_req {
	sroce_u32 handle;
	sroce_u32 reserved;
};

struct sroce_handle_resp {
	sroce_u32 handle;
	sroce_u32 reserved;
};

struct sroce_hello {
	sroce_u32 abi_version; /* SROCE_ABI_VERSION */
	sroce_u32 flags;       /* SROCE_HELLO_*; 0 on the kernel channel */
};

/* Socket path: HELLO carries SROCE_HELLO_MEM_FD, struct sroce_hello_mem after
 * struct sroce_hello, and exactly one fd (SCM_RIGHTS): the process's own
 * /proc/self/mem opened O_RDWR. sroced reaches the context's memory only
 * through that file, which stays bound to the address space it was opened on
 * (an exec or exit of the process ends every access: docs/security.md). The
 * daemon checks that the fd is a procfs mem file of the peer and that reading
 * probe_addr through it gives probe; otherwise HELLO fails with EBADF, and
 * without the flag or the fd with EPERM. */
#define SROCE_HELLO_MEM_FD 0x1u

struct sroce_hello_mem {
	sroce_u64 probe_addr; /* address of an 8-byte value in the sender's memory */
	sroce_u64 probe;      /* that value (the daemon reads it back through the fd) */
};

struct sroce_hello_resp {
	sroce_u32 abi_version;
	sroce_u32 context; /* daemon-side context id (diagnostics) */
};

struct sroce_device_attr {
	sroce_u64 fw_ver;
	sroce_u64 node_guid;
	sroce_u64 sys_image_guid;
	sroce_u64 max_mr_size;
	sroce_u64 page_size_cap;
	sroce_u32 vendor_id;
	sroce_u32 vendor_part_id;
	sroce_u32 hw_ver;
	sroce_u32 max_qp;
	sroce_u32 max_qp_wr;
	sroce_u32 device_cap_flags;
	sroce_u32 max_sge;
	sroce_u32 max_cq;
	sroce_u32 max_cqe;
	sroce_u32 max_mr;
	sroce_u32 max_pd;
	sroce_u32 max_qp_rd_atom;
	sroce_u32 max_qp_init_rd_atom;
	sroce_u32 max_srq;
	sroce_u32 max_srq_wr;
	sroce_u32 max_srq_sge;
	sroce_u32 max_ah;
	sroce_u32 max_inline_data;
	sroce_u16 max_pkeys;
	sroce_u8 atomic_cap; /* enum ibv_atomic_cap */
	sroce_u8 phys_port_cnt;
	sroce_u32 reserved;
};

struct sroce_query_port {
	sroce_u8 port_num;
	sroce_u8 reserved[7];
};

struct sroce_port_attr {
	sroce_u32 state;       /* enum ibv_port_state */
	sroce_u32 max_mtu;     /* enum ibv_mtu */
	sroce_u32 active_mtu;  /* enum ibv_mtu */
	sroce_u32 gid_tbl_len;
	sroce_u32 port_cap_flags;
	sroce_u32 max_msg_sz;
	sroce_u16 pkey_tbl_len;
	sroce_u8 active_width;
	sroce_u8 active_speed;
	sroce_u8 phys_state;
	sroce_u8 link_layer;   /* IBV_LINK_LAYER_ETHERNET */
	sroce_u8 reserved[2];
};

struct sroce_query_gid {
	sroce_u8 port_num;
	sroce_u8 reserved[3];
	sroce_u32 index;
};

struct sroce_gid_entry {
	sroce_u8 gid[16];
	sroce_u32 index;
	sroce_u32 gid_type; /* 1 = RoCE v2 */
};

struct sroce_reg_mr {
	sroce_u64 addr;   /* in the caller's address space */
	sroce_u64 length;
	sroce_u64 iova;   /* address remote peers use (== addr unless zero-based) */
	sroce_u32 pd;
	sroce_u32 access; /* enum ibv_access_flags */
};

struct sroce_reg_mr_resp {
	sroce_u32 lkey;
	sroce_u32 rkey;
};

/* SROCE_OP_SHARE_MR (socket path only; docs/performance.md, "Shared memory"): the whole
 * pages [va, va + len) of the registered MR `lkey` are, in the caller's address space, a
 * MAP_SHARED mapping of the memfd passed with the request (exactly one fd), at file offset
 * `offset`. The daemon maps it and reads and writes those pages with memcpy instead of through
 * the mem file. It refuses (EINVAL) a range that is not page-aligned or not inside the MR, an
 * MR already shared, and (EBADF) a descriptor that is not a tmpfs memfd open for reading and
 * writing, sealed with F_SEAL_SHRINK, at least offset + len bytes long: the caller can then
 * never make a daemon access fault. Failure changes nothing; the MR keeps working through the
 * mem file. */
struct sroce_share_mr {
	sroce_u32 lkey;
	sroce_u32 reserved;
	sroce_u64 va;
	sroce_u64 len;
	sroce_u64 offset;
};

/* SROCE_OP_ALLOC_MW: a memory window (IBA 10.6.7) of `type` (enum ibv_mw_type: 1 or 2) in
 * PD `pd`. The reply's handle names it in BIND_MW work requests and DEALLOC_MW; rkey is its
 * first R_Key (each bind gives it a new key byte). */
struct sroce_alloc_mw {
	sroce_u32 pd;
	sroce_u8 type;
	sroce_u8 reserved[3];
};

struct sroce_alloc_mw_resp {
	sroce_u32 handle;
	sroce_u32 rkey;
};

struct sroce_create_cq {
	sroce_u32 cqe;          /* at least this many entries */
	sroce_u32 channel;      /* comp channel handle, 0 = none */
	sroce_u64 user_handle;  /* returned in comp events (libibverbs: the ibv_cq pointer) */
};

struct sroce_create_cq_resp {
	sroce_u32 handle;
	sroce_u32 cqe;          /* actual ring capacity */
	sroce_u64 ring_bytes;   /* size to mmap from the passed memfd */
};

struct sroce_qp_cap {
	sroce_u32 max_send_wr;
	sroce_u32 max_recv_wr;
	sroce_u32 max_send_sge;
	sroce_u32 max_recv_sge;
	sroce_u32 max_inline_data;
	sroce_u32 reserved;
};

struct sroce_create_qp {
	sroce_u32 pd;
	sroce_u32 send_cq;
	sroce_u32 recv_cq;
	sroce_u32 srq;          /* 0 = own receive queue */
	sroce_u8 qp_type;       /* enum ibv_qp_type */
	sroce_u8 sq_sig_all;
	sroce_u8 reserved[6];
	sroce_u64 user_handle;  /* returned in async events (the ibv_qp pointer) */
	struct sroce_qp_cap cap;
};

/* One memfd holds both rings of a QP: SQ at sq_offset, RQ at rq_offset. */
struct sroce_create_qp_resp {
	sroce_u32 qpn;
	sroce_u32 reserved;
	struct sroce_qp_cap cap; /* actual capacities */
	sroce_u64 ring_bytes;
	sroce_u64 sq_offset;
	sroce_u64 rq_offset;     /* ~0 when the QP uses an SRQ */
};

struct sroce_ah_attr {
	sroce_u8 dgid[16];
	sroce_u32 flow_label;
	sroce_u8 sgid_index;
	sroce_u8 hop_limit;
	sroce_u8 traffic_class;
	sroce_u8 sl;
	sroce_u8 port_num;
	sroce_u8 is_global;
	sroce_u8 reserved[2];
};

/* Mirrors ibv_qp_attr (the RoCE subset); attr_mask is enum ibv_qp_attr_mask. */
struct sroce_qp_attr {
	sroce_u32 qp_state;
	sroce_u32 cur_qp_state;
	sroce_u32 path_mtu;
	sroce_u32 qkey;
	sroce_u32 rq_psn;
	sroce_u32 sq_psn;
	sroce_u32 dest_qp_num;
	sroce_u32 qp_access_flags;
	struct sroce_qp_cap cap;
	struct sroce_ah_attr ah_attr;
	sroce_u16 pkey_index;
	sroce_u8 en_sqd_async_notify;
	sroce_u8 sq_draining;
	sroce_u8 max_rd_atomic;
	sroce_u8 max_dest_rd_atomic;
	sroce_u8 min_rnr_timer;
	sroce_u8 port_num;
	sroce_u8 timeout;
	sroce_u8 retry_cnt;
	sroce_u8 rnr_retry;
	sroce_u8 reserved[5];
};

struct sroce_modify_qp {
	sroce_u32 qpn;
	sroce_u32 attr_mask;
	struct sroce_qp_attr attr;
};

struct sroce_destroy_qp_resp {
	sroce_u32 events_reported; /* async events delivered for this QP (ibv_destroy_qp waits on them) */
	sroce_u32 reserved;
};

struct sroce_create_srq {
	sroce_u32 pd;
	sroce_u32 max_wr;
	sroce_u32 max_sge;
	sroce_u32 srq_limit;
	sroce_u64 user_handle;
};

struct sroce_create_srq_resp {
	sroce_u32 handle;
	sroce_u32 max_wr;
	sroce_u32 max_sge;
	sroce_u32 reserved;
	sroce_u64 ring_bytes;
};

struct sroce_modify_srq {
	sroce_u32 handle;
	sroce_u32 attr_mask; /* enum ibv_srq_attr_mask */
	sroce_u32 max_wr;
	sroce_u32 srq_limit;
};

struct sroce_srq_attr {
	sroce_u32 max_wr;
	sroce_u32 max_sge;
	sroce_u32 srq_limit;
	sroce_u32 reserved;
};

struct sroce_create_ah {
	sroce_u32 pd;
	sroce_u32 reserved;
	struct sroce_ah_attr attr;
};

/* ------------------------------------------------------------------------
 * Rings: single producer, single consumer, in shared memory.
 * The producer writes entry [prod % size], then stores prod + 1 with release;
 * the consumer loads prod with acquire, reads, then stores cons with release.
 * Indices are free-running u32; size is a power of two. Each index lives on
 * its own cache line.
 *   SQ, RQ, SRQ: producer = application (provider), consumer = daemon.
 *   CQ:          producer = daemon, consumer = application.
 * ---------------------------------------------------------------------- */
struct sroce_ring {
	sroce_u32 prod;
	sroce_u32 prod_pad[15];
	sroce_u32 cons;
	sroce_u32 cons_pad[15];
	sroce_u32 size;        /* entries, a power of two */
	sroce_u32 entry_size;  /* bytes, a multiple of 16 */
	/* The consumer sets `sleeping` before it blocks on the doorbell; a
	 * producer that sees it set after publishing rings the doorbell
	 * (eventfd write). For CQs, `armed` is ibv_req_notify_cq state:
	 * 0 off, 1 next completion, 2 solicited only; the daemon clears it
	 * when it sends the event. */
	sroce_u32 sleeping;
	sroce_u32 armed;
	sroce_u32 error;       /* set by the daemon when the object is dead (device fatal) */
	sroce_u32 reserved[11];
	/* entries follow, 64-byte aligned */
};

struct sroce_sge {
	sroce_u64 addr;
	sroce_u32 length;
	sroce_u32 lkey;
};

/* A send work request. Followed in the slot by num_sge sroce_sge, or by
 * inline_len bytes of data when IBV_SEND_INLINE was given (the provider
 * copies them at post time, as the verbs require). */
struct sroce_send_wqe {
	sroce_u64 wr_id;
	sroce_u8 opcode;       /* enum ibv_wr_opcode */
	sroce_u8 reserved0;
	sroce_u16 num_sge;
	sroce_u32 send_flags;  /* enum ibv_send_flags */
	sroce_u32 imm_data;    /* host order (also invalidate rkey for SEND_WITH_INV and
	                        * LOCAL_INV; the window's access flags for BIND_MW) */
	sroce_u32 inline_len;
	sroce_u64 remote_addr; /* RDMA and atomic */
	sroce_u32 rkey;
	sroce_u32 reserved1;
	sroce_u64 compare_add; /* BIND_MW: the window's length (remote_addr: its address,
	                        * rkey: the window's new R_Key) */
	sroce_u64 swap;        /* BIND_MW: MW handle | MR lkey << 32 */
	sroce_u32 ah;          /* UD */
	sroce_u32 remote_qpn;
	sroce_u32 remote_qkey;
	sroce_u32 reserved2;
};

/* A receive work request, followed by num_sge sroce_sge. */
struct sroce_recv_wqe {
	sroce_u64 wr_id;
	sroce_u32 num_sge;
	sroce_u32 reserved;
};

/* A completion, as ibv_wc needs it. */
struct sroce_cqe {
	sroce_u64 wr_id;
	sroce_u8 status;     /* enum ibv_wc_status */
	sroce_u8 opcode;     /* enum ibv_wc_opcode */
	sroce_u8 sl;
	sroce_u8 reserved0;
	sroce_u32 vendor_err;
	sroce_u32 byte_len;
	sroce_u32 imm_data;  /* host order; invalidated rkey with IBV_WC_WITH_INV */
	sroce_u32 qp_num;
	sroce_u32 src_qp;
	sroce_u32 wc_flags;
	sroce_u16 pkey_index;
	sroce_u16 reserved1;
	/* When the engine completed the work: nanoseconds of the daemon's
	 * CLOCK_MONOTONIC (the device clock of ibv_wc_read_completion_ts, one
	 * tick a nanosecond: hca_core_clock 1000000 kHz). */
	sroce_u64 timestamp;
};

/* Doorbells: written as 8-byte eventfd counts by the side that produced
 * work. The QP/SRQ doorbell (application -> daemon) is one eventfd per
 * context, passed with HELLO after the async event socket. */

/* Events the daemon writes on the context's async event socket and on comp
 * channel sockets: the same layouts as the kernel's uverbs event descriptors,
 * so libibverbs' ibv_get_async_event / ibv_get_cq_event read them unchanged. */
struct sroce_async_event_desc {
	sroce_u64 element;    /* user_handle of the CQ/QP/SRQ, or port number */
	sroce_u32 event_type; /* enum ibv_event_type */
	sroce_u32 reserved;
};

struct sroce_comp_event_desc {
	sroce_u64 cq_handle;  /* the CQ's user_handle */
};

/* SROCE_OP_STATS (sroce status|qps|lanes). Allowed before HELLO and from
 * any peer the uid policy admits. The body is optional (an empty body means
 * what = 0). The reply body is the JSON text when it fits in SROCE_MAX_MSG;
 * when it does not, the reply body is empty and one fd is passed: a memfd
 * holding the whole JSON text (its size is the text's length rounded up to
 * a page, padded with NUL bytes). */
struct sroce_stats_req {
	sroce_u32 what;     /* 0 = everything (the only value today) */
	sroce_u32 reserved;
};

/* SROCE_OP_REREG_MR (ibv_rereg_mr). Changes the MR named by lkey in place: with
 * IBV_REREG_MR_CHANGE_TRANSLATION the range (addr, length, iova), with _CHANGE_PD the PD,
 * with _CHANGE_ACCESS the access flags; fields of a change not asked for are ignored.
 * Programs do not exchange keys again after a rereg, so the reply should return the same
 * lkey and rkey. A failure leaves the MR as it was. A daemon without it answers
 * -EOPNOTSUPP, which the provider reports as "rereg not supported". */
struct sroce_rereg_mr {
	sroce_u32 lkey;
	sroce_u32 flags;  /* enum ibv_rereg_mr_flags */
	sroce_u64 addr;
	sroce_u64 length;
	sroce_u64 iova;
	sroce_u32 pd;     /* with IBV_REREG_MR_CHANGE_PD */
	sroce_u32 access; /* with IBV_REREG_MR_CHANGE_ACCESS */
};

/* SROCE_OP_RESIZE_CQ (ibv_resize_cq, IBA 11.2.6.3 "Resize Completion Queue"): the CQ
 * named by handle gets a new ring of at least cqe entries; the completions not yet
 * polled move to it in order, so none is lost. The reply is a sroce_create_cq_resp
 * (handle unchanged, the new capacity and ring size) with the new ring's memfd; on
 * the kernel path the module's new ring follows the request as a sroce_kring_ext and
 * no fd is passed. -EINVAL when cqe is 0, above max_cqe, or below the completions the
 * CQ holds (as rxe). The provider holds the CQ's poll lock throughout, so nothing
 * consumes from the old ring while the daemon moves its entries. */
struct sroce_resize_cq {
	sroce_u32 handle;
	sroce_u32 cqe;
};

/* ------------------------------------------------------------------------
 * The kernel path (rdma_sroce.ko, docs/kmod.md).
 *
 * With the module loaded, sroce0 is a real ib_device: applications use the
 * kernel's uverbs (/dev/infiniband/uverbsN), and the module mirrors every
 * object to sroced over one control channel, the misc device
 * SROCE_KDEV_PATH, which sroced opens and binds to a device with
 * SROCE_KIOC_ATTACH. The channel carries the messages above, each behind a
 * struct sroce_kmsg envelope (one message per read() or write()):
 *
 *   module -> daemon  REQUEST  sroce_msg_hdr + the op's body [+ extension]
 *   daemon -> module  REPLY    sroce_msg_hdr (op, seq echoed; status) + body
 *   module -> daemon  CLOSE    context ctx is gone (the socket path's hang-up)
 *   daemon -> module  COMP_EVENT  sroce_comp_event_desc
 *   daemon -> module  ASYNC_EVENT sroce_async_event_desc
 *   module -> daemon  GID      sroce_kgid (the kernel's RoCE GID table)
 *   module -> daemon  GSI_SEND sroce_kgsi + MAD (QP1 send, rdma_cm)
 *   daemon -> module  GSI_RECV sroce_kgsi + MAD (QP1 receive)
 *
 * Differences from the socket path: no fds are passed. The rings and the
 * pinned pages of MRs belong to the module; a request that creates one
 * carries a struct sroce_kmap after its body, and the daemon maps it with
 * mmap(channel_fd, map.offset, map.bytes, MAP_SHARED). Handles in the
 * daemon's replies stay the daemon's; user_handle fields carry the module's
 * object ids, so events come back naming them. Completion channels are the
 * kernel's: CREATE_CQ carries channel = SROCE_KCHANNEL and the daemon sends
 * COMP_EVENT for an armed CQ where it would write to a channel socket.
 * Doorbells: the provider calls the uverbs POST_SEND / POST_RECV /
 * POST_SRQ_RECV command with no work requests, and the module signals the
 * eventfd the daemon gave at attach.
 * ---------------------------------------------------------------------- */
#define SROCE_KDEV_PATH "/dev/sroce"
#define SROCE_KABI_VERSION 2 /* 2: HELLO carries sroce_khello_ext */
#define SROCE_KCHANNEL 0xffffffffu /* sroce_create_cq.channel on the kernel path */

enum sroce_kmsg_kind {
	SROCE_KMSG_REQUEST = 1,
	SROCE_KMSG_REPLY,
	SROCE_KMSG_CLOSE,
	SROCE_KMSG_COMP_EVENT,
	SROCE_KMSG_ASYNC_EVENT,
	SROCE_KMSG_GID,
	SROCE_KMSG_GSI_SEND,
	SROCE_KMSG_GSI_RECV,
};

struct sroce_kmsg {
	sroce_u32 kind; /* enum sroce_kmsg_kind */
	sroce_u32 ctx;  /* the module's context id (REQUEST, REPLY, CLOSE), else 0 */
};
#define SROCE_KMSG_MAX (sizeof(struct sroce_kmsg) + SROCE_MAX_MSG)

/* ioctl(channel_fd, SROCE_KIOC_ATTACH, &attach): serve device `ibdev`. One
 * daemon per device (EBUSY otherwise); the opener needs CAP_NET_ADMIN. attr
 * gives the limits the device reports (GUIDs and fw_ver are the module's).
 * Closing the channel detaches: the module fails what is in flight with EIO,
 * sets `error` in every ring of that daemon's contexts, wakes their
 * completion channels and reports IBV_EVENT_DEVICE_FATAL; the port goes down
 * until a daemon attaches again. */
struct sroce_kattach {
	char ibdev[64];
	sroce_u32 abi_version;  /* SROCE_KABI_VERSION */
	sroce_s32 doorbell_fd;  /* eventfd the module signals on doorbells, or -1 */
	struct sroce_device_attr attr;
};
#define SROCE_KIOC_ATTACH _IOW('S', 1, struct sroce_kattach)

/* A region the daemon maps from the channel (rings: the module's memory;
 * MRs: the application's pinned pages, read-only when the MR is). */
struct sroce_kmap {
	sroce_u64 offset; /* mmap offset on the channel fd */
	sroce_u64 bytes;  /* mapping length, a page multiple */
};

/* After sroce_create_cq / sroce_create_srq: the ring, its header set up. */
struct sroce_kring_ext {
	struct sroce_kmap map;
	sroce_u32 size;       /* entries, a power of two */
	sroce_u32 entry_size;
};

/* After sroce_create_qp: both rings in one region, laid out as the socket
 * path's sroce_create_qp_resp describes (rq_offset ~0 with an SRQ). */
struct sroce_kqp_ext {
	struct sroce_kmap map;
	sroce_u64 sq_offset;
	sroce_u64 rq_offset;
	sroce_u32 sq_size;
	sroce_u32 sq_entry_size;
	sroce_u32 rq_size;
	sroce_u32 rq_entry_size;
};

/* After sroce_hello: who opened the device (the opener's effective ids, in
 * the initial namespaces), so the daemon applies the socket path's uid
 * policy and per-uid limits to kernel contexts too. */
struct sroce_khello_ext {
	sroce_u32 uid;
	sroce_u32 gid;
	sroce_u32 pid;        /* thread group id */
	sroce_u32 reserved;
};

/* After sroce_reg_mr: byte `addr` of the MR is at map start + first_byte. */
struct sroce_kmr_ext {
	struct sroce_kmap map;
	sroce_u64 first_byte;
	sroce_u32 writable;   /* the map may be mapped PROT_WRITE */
	sroce_u32 reserved;
};

/* SROCE_KMSG_GID: entry `index` of the RoCE GID table was set or cleared.
 * The daemon resolves sgid_index (ah_attr) with this table on the kernel
 * path; the module sends the whole table at attach. */
struct sroce_kgid {
	struct sroce_gid_entry entry; /* gid_type: 1 = RoCE v2 (the only kind listed) */
	sroce_u32 present;            /* 1 set, 0 cleared */
	sroce_u32 reserved;
};

/* SROCE_KMSG_GSI_SEND / _RECV: one MAD of QP1 (IBA 13.5.1), carried as a
 * RoCEv2 UD datagram (BTH + DETH, P_Key and Q_Key as given). */
struct sroce_kgsi {
	sroce_u8 sgid[16];     /* SEND: our GID; RECV: the sender's GID */
	sroce_u8 dgid[16];     /* SEND: destination; RECV: the GID it came to */
	sroce_u32 remote_qpn;  /* SEND: destination QP; RECV: source QP */
	sroce_u32 qkey;
	sroce_u32 flow_label;
	sroce_u16 pkey;
	sroce_u8 traffic_class;
	sroce_u8 hop_limit;
	sroce_u32 len;         /* MAD bytes that follow (at most 256) */
	sroce_u32 reserved;
};
#define SROCE_KGSI_MAX_MAD 256

/* Driver data of the uverbs commands (rdma_sroce.ko <-> libsroce): mmap
 * offsets are on the uverbs fd. */
struct sroce_kuctx_resp {   /* GET_CONTEXT */
	sroce_u32 abi_version;  /* SROCE_KABI_VERSION */
	sroce_u32 ctx;
};
struct sroce_kring_resp {   /* CREATE_CQ, CREATE_SRQ */
	sroce_u64 mmap_offset;
	sroce_u64 ring_bytes;
};
struct sroce_kqp_resp {     /* CREATE_QP */
	sroce_u64 mmap_offset;
	sroce_u64 ring_bytes;
	sroce_u64 sq_offset;
	sroce_u64 rq_offset;    /* ~0 with an SRQ */
};
struct sroce_kah_resp {     /* CREATE_AH: the handle UD work requests name */
	sroce_u32 handle;
	sroce_u32 reserved;
};
struct sroce_kmw_resp {     /* ALLOC_MW: the handle BIND_MW work requests name */
	sroce_u32 handle;
	sroce_u32 reserved;
};

#define SROCE_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#ifdef __cplusplus
#undef SROCE_ABI_ASSERT
#define SROCE_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#endif
SROCE_ABI_ASSERT(sizeof(struct sroce_msg_hdr) == 24, "sroce_msg_hdr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_hello) == 8, "sroce_hello layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_hello_mem) == 16, "sroce_hello_mem layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_share_mr) == 32, "sroce_share_mr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_device_attr) == 120, "sroce_device_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_port_attr) == 32, "sroce_port_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_create_qp) == 56, "sroce_create_qp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_ah_attr) == 28, "sroce_ah_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_qp_attr) == 100, "sroce_qp_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_ring) == 192, "sroce_ring layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_send_wqe) == 72, "sroce_send_wqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_recv_wqe) == 16, "sroce_recv_wqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_cqe) == 48, "sroce_cqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_sge) == 16, "sroce_sge layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_async_event_desc) == 16, "async event desc layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_comp_event_desc) == 8, "comp event desc layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_stats_req) == 8, "sroce_stats_req layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_rereg_mr) == 40, "sroce_rereg_mr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_resize_cq) == 8, "sroce_resize_cq layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_alloc_mw) == 8, "sroce_alloc_mw layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_alloc_mw_resp) == 8, "sroce_alloc_mw_resp layout");

SROCE_ABI_ASSERT(sizeof(struct sroce_kmsg) == 8, "sroce_kmsg layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kattach) == 192, "sroce_kattach layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kmap) == 16, "sroce_kmap layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kring_ext) == 24, "sroce_kring_ext layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kqp_ext) == 48, "sroce_kqp_ext layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kmr_ext) == 32, "sroce_kmr_ext layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_khello_ext) == 16, "sroce_khello_ext layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kgid) == 32, "sroce_kgid layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kgsi) == 56, "sroce_kgsi layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kuctx_resp) == 8, "sroce_kuctx_resp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kring_resp) == 16, "sroce_kring_resp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kqp_resp) == 32, "sroce_kqp_resp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kah_resp) == 8, "sroce_kah_resp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_kmw_resp) == 8, "sroce_kmw_resp layout");

#endif /* SROCE_ABI_H */
