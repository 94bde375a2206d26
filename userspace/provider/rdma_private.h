// The part of libibverbs' private provider interface (IBVERBS_PRIVATE_34, rdma-core 44) that
// libsroce uses, declared here because Debian ships no provider headers and rdma-core's own
// driver.h does not compile as C++.
//
// Written from reading the public rdma-core v44.0 sources (libibverbs/driver.h, init.c,
// device.c, dummy_ops.c). Only what sroce needs is declared; every layout the library reads or
// writes is pinned by the static asserts below and checked against the installed library by
// tests/provider/abi_check (symbol versions with readelf, and verbs_set_ops' copy of every op
// slot into the public and private tables, which catches any misplaced member).
//
// If Debian moves to a libibverbs whose private ABI is not 34, the provider's file name
// (libsroce-rdmav34.so), the registration symbol and this file must change together; the
// build-time check fails first.
#ifndef SROCE_PROVIDER_RDMA_PRIVATE_H
#define SROCE_PROVIDER_RDMA_PRIVATE_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SROCE_IBVERBS_PABI 34

extern "C" {

// ccan's intrusive list node, as embedded in struct verbs_device.
struct sroce_list_node {
  sroce_list_node* next;
  sroce_list_node* prev;
};

// How a provider claims a device. Kind values of the v44 match table.
enum : uint8_t {
  kVerbsMatchSentinel = 0,
  kVerbsMatchPci = 1,
  kVerbsMatchModalias = 2,
  kVerbsMatchDriverId = 3,
};

struct verbs_match_ent {
  void* driver_data;
  union {
    const char* modalias;
    uint64_t driver_id;
  } u;
  uint16_t vendor;
  uint16_t device;
  uint8_t kind;
};

// Opaque here: libibverbs' record of a device found in sysfs. The provider only passes it on.
struct verbs_sysfs_dev;

struct verbs_device;

struct verbs_device_ops {
  const char* name;
  uint32_t match_min_abi_version;
  uint32_t match_max_abi_version;
  const verbs_match_ent* match_table;
  const verbs_device_ops** static_providers;
  bool (*match_device)(verbs_sysfs_dev* sysfs_dev);
  verbs_context* (*alloc_context)(ibv_device* device, int cmd_fd, void* private_data);
  verbs_context* (*import_context)(ibv_device* device, int cmd_fd);
  verbs_device* (*alloc_device)(verbs_sysfs_dev* sysfs_dev);
  void (*uninit_device)(verbs_device* device);
};

// The provider allocates this (alloc_device); libibverbs fills ops, refcount, entry and sysfs.
struct verbs_device {
  ibv_device device;  // must stay first: libibverbs converts between the two pointers
  const verbs_device_ops* ops;
  int refcount;  // a C11 atomic_int in libibverbs; same size and alignment
  sroce_list_node entry;
  verbs_sysfs_dev* sysfs;
  uint64_t core_support;
};

// Every operation a provider may supply, in the (alphabetical) order of rdma-core 44. A null
// slot keeps libibverbs' default, which fails with EOPNOTSUPP/ENOSYS.
struct verbs_mr;
struct verbs_context_ops {
  int (*advise_mr)(ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t);
  ibv_dm* (*alloc_dm)(ibv_context*, ibv_alloc_dm_attr*);
  ibv_mw* (*alloc_mw)(ibv_pd*, ibv_mw_type);
  ibv_mr* (*alloc_null_mr)(ibv_pd*);
  ibv_pd* (*alloc_parent_domain)(ibv_context*, ibv_parent_domain_init_attr*);
  ibv_pd* (*alloc_pd)(ibv_context*);
  ibv_td* (*alloc_td)(ibv_context*, ibv_td_init_attr*);
  void (*async_event)(ibv_context*, ibv_async_event*);
  int (*attach_counters_point_flow)(ibv_counters*, ibv_counter_attach_attr*, ibv_flow*);
  int (*attach_mcast)(ibv_qp*, const ibv_gid*, uint16_t);
  int (*bind_mw)(ibv_qp*, ibv_mw*, ibv_mw_bind*);
  int (*close_xrcd)(ibv_xrcd*);
  void (*cq_event)(ibv_cq*);
  ibv_ah* (*create_ah)(ibv_pd*, ibv_ah_attr*);
  ibv_counters* (*create_counters)(ibv_context*, ibv_counters_init_attr*);
  ibv_cq* (*create_cq)(ibv_context*, int cqe, ibv_comp_channel*, int comp_vector);
  ibv_cq_ex* (*create_cq_ex)(ibv_context*, ibv_cq_init_attr_ex*);
  ibv_flow* (*create_flow)(ibv_qp*, ibv_flow_attr*);
  ibv_flow_action* (*create_flow_action_esp)(ibv_context*, ibv_flow_action_esp_attr*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  ibv_qp* (*create_qp_ex)(ibv_context*, ibv_qp_init_attr_ex*);
  ibv_rwq_ind_table* (*create_rwq_ind_table)(ibv_context*, ibv_rwq_ind_table_init_attr*);
  ibv_srq* (*create_srq)(ibv_pd*, ibv_srq_init_attr*);
  ibv_srq* (*create_srq_ex)(ibv_context*, ibv_srq_init_attr_ex*);
  ibv_wq* (*create_wq)(ibv_context*, ibv_wq_init_attr*);
  int (*dealloc_mw)(ibv_mw*);
  int (*dealloc_pd)(ibv_pd*);
  int (*dealloc_td)(ibv_td*);
  int (*dereg_mr)(verbs_mr*);
  int (*destroy_ah)(ibv_ah*);
  int (*destroy_counters)(ibv_counters*);
  int (*destroy_cq)(ibv_cq*);
  int (*destroy_flow)(ibv_flow*);
  int (*destroy_flow_action)(ibv_flow_action*);
  int (*destroy_qp)(ibv_qp*);
  int (*destroy_rwq_ind_table)(ibv_rwq_ind_table*);
  int (*destroy_srq)(ibv_srq*);
  int (*destroy_wq)(ibv_wq*);
  int (*detach_mcast)(ibv_qp*, const ibv_gid*, uint16_t);
  void (*free_context)(ibv_context*);
  int (*free_dm)(ibv_dm*);
  int (*get_srq_num)(ibv_srq*, uint32_t*);
  ibv_dm* (*import_dm)(ibv_context*, uint32_t);
  ibv_mr* (*import_mr)(ibv_pd*, uint32_t);
  ibv_pd* (*import_pd)(ibv_context*, uint32_t);
  int (*modify_cq)(ibv_cq*, ibv_modify_cq_attr*);
  int (*modify_flow_action_esp)(ibv_flow_action*, ibv_flow_action_esp_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int attr_mask);
  int (*modify_qp_rate_limit)(ibv_qp*, ibv_qp_rate_limit_attr*);
  int (*modify_srq)(ibv_srq*, ibv_srq_attr*, int attr_mask);
  int (*modify_wq)(ibv_wq*, ibv_wq_attr*);
  ibv_qp* (*open_qp)(ibv_context*, ibv_qp_open_attr*);
  ibv_xrcd* (*open_xrcd)(ibv_context*, ibv_xrcd_init_attr*);
  int (*poll_cq)(ibv_cq*, int num_entries, ibv_wc*);
  int (*post_recv)(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**);
  int (*post_send)(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
  int (*post_srq_ops)(ibv_srq*, ibv_ops_wr*, ibv_ops_wr**);
  int (*post_srq_recv)(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**);
  int (*query_device_ex)(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                         size_t attr_size);
  int (*query_ece)(ibv_qp*, ibv_ece*);
  int (*query_port)(ibv_context*, uint8_t port_num, ibv_port_attr*);
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int attr_mask, ibv_qp_init_attr*);
  int (*query_qp_data_in_order)(ibv_qp*, ibv_wr_opcode, uint32_t);
  int (*query_rt_values)(ibv_context*, ibv_values_ex*);
  int (*query_srq)(ibv_srq*, ibv_srq_attr*);
  int (*read_counters)(ibv_counters*, uint64_t*, uint32_t, uint32_t);
  ibv_mr* (*reg_dm_mr)(ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int);
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);
  ibv_mr* (*reg_mr)(ibv_pd*, void* addr, size_t length, uint64_t hca_va, int access);
  int (*req_notify_cq)(ibv_cq*, int solicited_only);
  int (*rereg_mr)(verbs_mr*, int, ibv_pd*, void*, size_t, int);
  int (*resize_cq)(ibv_cq*, int);
  int (*set_ece)(ibv_qp*, ibv_ece*);
  void (*unimport_dm)(ibv_dm*);
  void (*unimport_mr)(ibv_mr*);
  void (*unimport_pd)(ibv_pd*);
};
constexpr size_t kVerbsContextOpsSlots = 76;  // rdma-core 44 has 76 operations

// The MR as libibverbs sees it: ibv_dereg_mr/ibv_rereg_mr read mr_type and access.
enum sroce_verbs_mr_type : int {
  kVerbsMrTypeMr = 0,
  kVerbsMrTypeNull = 1,
  kVerbsMrTypeImported = 2,
  kVerbsMrTypeDmabuf = 3,
};
struct verbs_mr {
  ibv_mr ibv_mr;
  sroce_verbs_mr_type mr_type;
  int access;
};

// The QP as libibverbs sees it: ibv_qp_to_qp_ex() tests comp_mask for kVerbsQpEx.
enum : uint32_t { kVerbsQpXrcd = 1u << 0, kVerbsQpEx = 1u << 1 };
struct verbs_qp {
  union {
    ibv_qp qp;
    ibv_qp_ex qp_ex;
  };
  uint32_t comp_mask;
  void* xrcd;  // struct verbs_xrcd*, unused by sroce
};

struct verbs_cq {
  union {
    ibv_cq cq;
    ibv_cq_ex cq_ex;
  };
};

// Entry points (all exported by libibverbs.so.1 with version IBVERBS_PRIVATE_34).
void verbs_register_driver_34(const verbs_device_ops* ops);
void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, size_t alloc_size,
                                    verbs_context* context_offset, uint32_t driver_id);
void verbs_uninit_context(verbs_context* context);
void verbs_set_ops(verbs_context* vctx, const verbs_context_ops* ops);

// The uverbs command helpers the kernel path uses (rdma_sroce.ko, docs/kmod.md), from v44's
// driver.h. Their command and response arguments are libibverbs' buffers: the write() header
// (struct ib_uverbs_cmd_hdr) then the kernel's request (<rdma/ib_user_verbs.h>), and the
// kernel's response followed by the driver data. The kernel structs end in flexible arrays, so
// C++ cannot embed them: callers pass byte buffers of sizeof(hdr) + sizeof(request) and
// sizeof(response) + sizeof(driver data) (kernel_path.cc), hence void* here (C linkage: the
// parameter types do not change the symbol).
int ibv_cmd_get_context(verbs_context* context, void* cmd, size_t cmd_size, void* resp,
                        size_t resp_size);
int ibv_cmd_query_device_any(ibv_context* context, const ibv_query_device_ex_input* input,
                             ibv_device_attr_ex* attr, size_t attr_size, void* resp,
                             size_t* resp_size);
int ibv_cmd_query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr,
                       void* cmd, size_t cmd_size);
int ibv_cmd_alloc_pd(ibv_context* context, ibv_pd* pd, void* cmd, size_t cmd_size, void* resp,
                     size_t resp_size);
int ibv_cmd_dealloc_pd(ibv_pd* pd);
int ibv_cmd_reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access,
                   verbs_mr* vmr, void* cmd, size_t cmd_size, void* resp, size_t resp_size);
int ibv_cmd_dereg_mr(verbs_mr* vmr);
int ibv_cmd_rereg_mr(verbs_mr* vmr, uint32_t flags, void* addr, size_t length, uint64_t hca_va,
                     int access, ibv_pd* pd, void* cmd, size_t cmd_sz, void* resp, size_t resp_sz);
int ibv_cmd_create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector,
                      ibv_cq* cq, void* cmd, size_t cmd_size, void* resp, size_t resp_size);
int ibv_cmd_destroy_cq(ibv_cq* cq);
int ibv_cmd_resize_cq(ibv_cq* cq, int cqe, void* cmd, size_t cmd_size, void* resp,
                      size_t resp_size);
int ibv_cmd_create_srq(ibv_pd* pd, ibv_srq* srq, ibv_srq_init_attr* attr, void* cmd,
                       size_t cmd_size, void* resp, size_t resp_size);
int ibv_cmd_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask, void* cmd,
                       size_t cmd_size);
int ibv_cmd_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, void* cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(ibv_srq* srq);
int ibv_cmd_create_qp_ex(ibv_context* context, verbs_qp* qp, ibv_qp_init_attr_ex* attr_ex,
                         void* cmd, size_t cmd_size, void* resp, size_t resp_size);
int ibv_cmd_query_qp(ibv_qp* qp, ibv_qp_attr* qp_attr, int attr_mask,
                     ibv_qp_init_attr* qp_init_attr, void* cmd, size_t cmd_size);
int ibv_cmd_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, void* cmd, size_t cmd_size);
int ibv_cmd_destroy_qp(ibv_qp* qp);
int ibv_cmd_create_ah(ibv_pd* pd, ibv_ah* ah, ibv_ah_attr* attr, void* resp, size_t resp_size);
int ibv_cmd_destroy_ah(ibv_ah* ah);
int ibv_cmd_alloc_mw(ibv_pd* pd, ibv_mw_type type, ibv_mw* mw, void* cmd, size_t cmd_size,
                     void* resp, size_t resp_size);
int ibv_cmd_dealloc_mw(ibv_mw* mw);

}  // extern "C"

// Layout pins. Pointer-sized slots only, so the op table is an array of 76 pointers.
static_assert(sizeof(verbs_context_ops) == kVerbsContextOpsSlots * sizeof(void*),
              "verbs_context_ops must hold exactly the 76 rdma-core 44 slots");
static_assert(sizeof(verbs_match_ent) == 24, "verbs_match_ent layout");
static_assert(offsetof(verbs_device_ops, alloc_context) == 40, "verbs_device_ops layout");
static_assert(sizeof(verbs_device_ops) == 72, "verbs_device_ops layout");
static_assert(offsetof(verbs_device, device) == 0, "ibv_device first in verbs_device");
static_assert(offsetof(verbs_device, ops) == sizeof(ibv_device), "verbs_device layout");
static_assert(offsetof(verbs_device, core_support) == sizeof(ibv_device) + 40,
              "verbs_device layout");
static_assert(offsetof(verbs_mr, mr_type) == sizeof(ibv_mr), "verbs_mr layout");
static_assert(offsetof(ibv_qp_ex, qp_base) == 0, "ibv_qp_ex starts with ibv_qp");
static_assert(offsetof(verbs_qp, comp_mask) == sizeof(ibv_qp_ex), "verbs_qp layout");
static_assert(sizeof(ibv_cq_ex) > sizeof(ibv_cq), "verbs_cq union");
// The public part: struct verbs_context (from <infiniband/verbs.h>) must end in ibv_context.
static_assert(offsetof(verbs_context, context) + sizeof(ibv_context) == sizeof(verbs_context),
              "ibv_context is the last member of verbs_context");

#endif  // SROCE_PROVIDER_RDMA_PRIVATE_H
