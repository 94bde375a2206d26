/* SPDX-License-Identifier: MIT */
/*
 * The sroce application ABI: what the rdma-core provider (libsroce), the
 * daemon (sroced) and, later, the kernel module (rdma_sroce.ko) exchange.
 *
 * One set of messages for both paths: without the module, the provider sends
 * them to sroced over a Unix SOCK_SEQPACKET socket (peer credentials checked
 * with SO_PEERCRED, file descriptors passed with SCM_RIGHTS); with the module,
 * the same structures travel through the module's control channel. Every
 * field is fixed-width with explicit padding; sizes are pinned by the
 * static asserts at the end, so any layout change is a compile error.
 *
 * Data verbs never send messages: they go through shared-memory rings
 * (struct sroce_ring) with doorbells (an eventfd the daemon sleeps on when
 * idle). Completions and events come back the same way.
 */
#ifndef SROCE_ABI_H
#define SROCE_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
typedef __u8 sroce_u8;
typedef __u16 sroce_u16;
typedef __u32 sroce_u32;
typedef __u64 sroce_u64;
typedef __s32 sroce_s32;
#else
#include <stdint.h>
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
	sroce_u32 reserved;
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
	sroce_u32 imm_data;    /* host order (also invalidate rkey for SEND_WITH_INV) */
	sroce_u32 inline_len;
	sroce_u64 remote_addr; /* RDMA and atomic */
	sroce_u32 rkey;
	sroce_u32 reserved1;
	sroce_u64 compare_add;
	sroce_u64 swap;
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

#define SROCE_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#ifdef __cplusplus
#undef SROCE_ABI_ASSERT
#define SROCE_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#endif
SROCE_ABI_ASSERT(sizeof(struct sroce_msg_hdr) == 24, "sroce_msg_hdr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_device_attr) == 120, "sroce_device_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_port_attr) == 32, "sroce_port_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_create_qp) == 56, "sroce_create_qp layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_ah_attr) == 28, "sroce_ah_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_qp_attr) == 100, "sroce_qp_attr layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_ring) == 192, "sroce_ring layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_send_wqe) == 72, "sroce_send_wqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_recv_wqe) == 16, "sroce_recv_wqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_cqe) == 40, "sroce_cqe layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_sge) == 16, "sroce_sge layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_async_event_desc) == 16, "async event desc layout");
SROCE_ABI_ASSERT(sizeof(struct sroce_comp_event_desc) == 8, "comp event desc layout");

#endif /* SROCE_ABI_H */
