// libsroce: the rdma-core provider for sroce. Thin by design: it turns verbs into control
// messages to sroced and data verbs into ring writes; all protocol work is in the daemon.
//
// Object layout: each verbs object embeds the libibverbs-visible struct first, so the pointer
// libibverbs hands back converts to ours with a static_cast-free container_of.
#ifndef SROCE_PROVIDER_PROVIDER_H
#define SROCE_PROVIDER_PROVIDER_H

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "control.h"
#include "rdma_private.h"
#include "ring.h"
#include "sroce_abi.h"

namespace sroce::provider {

template <typename Outer, typename Inner>
Outer* container_of(Inner* inner, Inner Outer::*member) {
  auto offset = reinterpret_cast<uintptr_t>(&(static_cast<Outer*>(nullptr)->*member));
  return reinterpret_cast<Outer*>(reinterpret_cast<uintptr_t>(inner) - offset);
}

// A lock for the data path: uncontended in the common case (one thread per queue).
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
      while (flag_.test(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// A shared-memory mapping received from the daemon (one memfd per CQ, QP or SRQ).
struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  int map(int memfd, size_t len);  // takes ownership of memfd (closes it)
  void unmap();
};

// Work requests the provider has posted and not yet seen complete, kept so that error
// completions can be made up when the daemon dies (nobody else will flush them) and so that
// "queue full" means "max_send_wr outstanding", as on hardware.
struct Shadow {
  struct Entry {
    uint64_t wr_id;
    uint32_t signaled;
    uint32_t opcode;  // enum ibv_wc_opcode of the completion it will make
  };
  std::vector<Entry> entries;     // a power of two, at least capacity
  std::atomic<uint32_t> head{0};  // next post (written by the posting side)
  std::atomic<uint32_t> tail{0};  // oldest outstanding (written by the polling side)
  uint32_t capacity = 0;          // max outstanding (the queue's max_wr)
  uint32_t outstanding() const {
    return head.load(std::memory_order_relaxed) - tail.load(std::memory_order_acquire);
  }
  bool full() const { return outstanding() >= capacity; }
  void init(uint32_t cap);
  Entry& at(uint32_t i) { return entries[i & (entries.size() - 1)]; }
};

struct Context;
struct Qp;

struct Device {
  verbs_device vdev;
};

struct Pd {
  ibv_pd pd;
  // A parent domain (ibv_alloc_parent_domain): pd.handle is its protection domain's, so
  // every verb that names a PD by handle works unchanged; dealloc frees only the wrapper.
  bool parent_domain = false;
};

struct Mr {
  verbs_mr vmr;
};

struct Ah {
  ibv_ah ah;
  uint32_t wqe_handle = 0;  // what sroce_send_wqe.ah names (the kernel's uverbs handle differs)
};

// A memory window (mw.cc). wqe_handle is what BIND_MW WQEs name: sroced's handle (on the
// kernel path mw.handle is the uverbs one).
struct Mw {
  ibv_mw mw;
  uint32_t wqe_handle = 0;
};

struct CompChannel {
  ibv_comp_channel channel;
  uint32_t handle;
};

// The QPs that complete into one CQ, for mapping a completion's qp_num to its QP. Replaced
// copy-on-write by the control path; the poller reads it with one acquire load.
struct QpTable {
  uint32_t count = 0;
  struct {
    uint32_t qpn;
    Qp* qp;
  } items[1];  // flexible
};

struct Cq {
  verbs_cq vcq;
  Context* ctx = nullptr;
  uint32_t handle = 0;
  bool extended = false;  // created with ibv_create_cq_ex
  uint64_t wc_flags = 0;
  Mapping mapping;
  RingView ring;
  SpinLock lock;
  std::atomic<QpTable*> qps{nullptr};
  std::vector<QpTable*> retired_tables;  // freed with the CQ
  // Extended polling: the completion start_poll/next_poll made current.
  sroce_cqe current{};
  bool current_is_flush = false;
  // Flush completions being handed out after the daemon died.
  uint32_t flush_cursor = 0;
  // Polls in a row that found nothing (see poll_found() in cq.cc).
  uint32_t empty_polls = 0;
};

struct Srq {
  ibv_srq srq;
  Context* ctx = nullptr;
  uint32_t handle = 0;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  Mapping mapping;
  RingView ring;
  SpinLock lock;
};

struct Qp {
  verbs_qp vqp;
  Context* ctx = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  uint32_t qpn = 0;
  ibv_qp_type type = IBV_QPT_RC;
  bool sq_sig_all = false;
  sroce_qp_cap cap{};
  uint64_t send_ops_flags = 0;
  Mapping mapping;
  RingView sq;
  RingView rq;
  SpinLock sq_lock;
  SpinLock rq_lock;
  Shadow sq_shadow;  // guarded by sq_lock (post) and send_cq->lock (retire)
  Shadow rq_shadow;  // guarded by rq_lock (post) and recv_cq->lock (retire)
  // ibv_wr_* batch state, between wr_start and wr_complete/wr_abort.
  uint32_t wr_prod = 0;    // ring index of the next WQE of the batch
  uint32_t wr_shadow = 0;  // shadow index of the next WQE of the batch
  sroce_send_wqe* wr_cur = nullptr;
  int wr_error = 0;
  bool wr_open = false;
};

// C++ state of a context (libibverbs allocates Context itself with calloc, so everything with
// a constructor lives here).
struct ContextState {
  // The kernel path (kernel_path.cc): rdma_sroce.ko's uverbs device, not sroced's socket.
  bool kernel = false;
  ControlChannel control;
  int daemon_async_fd = -1;  // the daemon writes async events here
  int inject_fd = -1;        // our end of the app's async socket (forwarded + made-up events)
  int doorbell_fd = -1;      // eventfd the daemon sleeps on
  int stop_fd = -1;          // eventfd telling the watcher to exit
  pthread_t watcher{};
  bool watcher_started = false;
  std::atomic<bool> dead{false};
  std::atomic<bool> async_read{false};  // the app reads async events (so it also acks them)
  std::mutex objects_mutex;
  std::vector<Cq*> cqs;
  std::vector<Qp*> qps;
  sroce_device_attr dev_attr{};
};

struct Context {
  verbs_context vctx;  // first: libibverbs allocates the whole struct around it
  ContextState* st;
};

inline Context* to_ctx(ibv_context* c) {
  return reinterpret_cast<Context*>(container_of(c, &verbs_context::context));
}
inline Cq* to_cq(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
inline Cq* to_cq(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* to_qp(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
inline Qp* to_qp(ibv_qp_ex* q) { return reinterpret_cast<Qp*>(q); }
inline Srq* to_srq(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }
inline Pd* to_pd(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
ibv_pd* verb_alloc_parent_domain(ibv_context*, ibv_parent_domain_init_attr*);  // objects.cc
inline Ah* to_ah(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }

inline bool ctx_dead(const Context* ctx) { return ctx->st->dead.load(std::memory_order_acquire); }

// Rings the context's doorbell if the daemon sleeps on `ring`. On the kernel path the doorbell
// is the uverbs command `kcmd` (POST_SEND, POST_RECV, POST_SRQ_RECV) without work requests on
// the QP's or SRQ's uverbs handle.
void ring_doorbell(Context* ctx, const RingView& ring, uint32_t kcmd, uint32_t khandle);

// True if the ring header at `offset` of `m` describes a ring that fits the mapping, with a
// power-of-two size and entries of at least `min_entry` bytes (a multiple of 16).
bool ring_geometry_ok(const Mapping& m, uint64_t offset, uint32_t min_entry);
void fill_ah_attr(sroce_ah_attr* out, const ibv_ah_attr& in);
void read_ah_attr(ibv_ah_attr* out, const sroce_ah_attr& in);

// The kernel path (kernel_path.cc, docs/kmod.md): the same objects, created through uverbs
// commands; the rings come from mmap of the uverbs fd.
bool kernel_device(int cmd_fd);  // cmd_fd is a real uverbs device, not sroce-run's stand-in
int kernel_setup_context(Context* ctx, const char* devname);
void kernel_doorbell(Context* ctx, uint32_t kcmd, uint32_t khandle);
int kernel_query_device_ex(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                           size_t);
int kernel_query_port(ibv_context*, uint8_t, ibv_port_attr*);
ibv_pd* kernel_alloc_pd(ibv_context*);
int kernel_dealloc_pd(ibv_pd*);
ibv_mr* kernel_reg_mr(ibv_pd*, void*, size_t, uint64_t, int);
int kernel_dereg_mr(verbs_mr*);
int kernel_rereg_mr(verbs_mr*, int, ibv_pd*, void*, size_t, int);
ibv_ah* kernel_create_ah(ibv_pd*, ibv_ah_attr*);
int kernel_destroy_ah(ibv_ah*);
// Create the uverbs object, map its ring(s) into the object's mapping and answer as sroced
// would on the socket path; on failure nothing is left.
int kernel_create_cq(Context* ctx, Cq* cq, int cqe, ibv_comp_channel* channel, int comp_vector,
                     sroce_create_cq_resp* resp);
// ibv_resize_cq on the kernel path: the module's new ring is mapped into `out`.
int kernel_resize_cq(Context* ctx, Cq* cq, int cqe, Mapping* out);
int kernel_create_srq(Context* ctx, Srq* srq, ibv_pd* pd, ibv_srq_init_attr* init,
                      sroce_create_srq_resp* resp);
int kernel_create_qp(Context* ctx, Qp* qp, ibv_qp_init_attr_ex* attr, sroce_create_qp_resp* resp);
int check_access(int access, int* out);  // objects.cc
// memory windows (mw.cc)
ibv_mw* verb_alloc_mw(ibv_pd*, ibv_mw_type);
int verb_dealloc_mw(ibv_mw*);
int verb_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*);
ibv_mw* kernel_alloc_mw(ibv_pd*, ibv_mw_type);
int kernel_dealloc_mw(ibv_mw*);

// Verbs entry points, one group per file.
// context.cc
int verb_query_device_ex(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                         size_t);
int verb_query_port(ibv_context*, uint8_t, ibv_port_attr*);
void verb_async_event(ibv_context*, ibv_async_event*);
// objects.cc
ibv_pd* verb_alloc_pd(ibv_context*);
int verb_dealloc_pd(ibv_pd*);
ibv_mr* verb_reg_mr(ibv_pd*, void*, size_t, uint64_t, int);
// Shared MRs (mr_share.cc): after REG_MR, after DEREG_MR (the pages go back to private memory
// once no live MR touches them), after a REREG_MR with a new translation or new rights
// (`dropped`: the daemon dropped its mapping, i.e. the range or the rights changed).
void share_mr_pages(Context* ctx, uint32_t lkey, const void* addr, size_t length);
void forget_mr_pages(const Context* ctx, uint32_t lkey);
void rereg_mr_pages(Context* ctx, uint32_t lkey, const void* addr, size_t length, bool dropped);
int verb_dereg_mr(verbs_mr*);
int verb_rereg_mr(verbs_mr*, int, ibv_pd*, void*, size_t, int);
ibv_ah* verb_create_ah(ibv_pd*, ibv_ah_attr*);
int verb_destroy_ah(ibv_ah*);
ibv_srq* verb_create_srq(ibv_pd*, ibv_srq_init_attr*);
int verb_modify_srq(ibv_srq*, ibv_srq_attr*, int);
int verb_query_srq(ibv_srq*, ibv_srq_attr*);
int verb_destroy_srq(ibv_srq*);
ibv_comp_channel* verb_create_comp_channel(ibv_context*);
int verb_destroy_comp_channel(ibv_comp_channel*);
// cq.cc
ibv_cq* verb_create_cq(ibv_context*, int, ibv_comp_channel*, int);
ibv_cq_ex* verb_create_cq_ex(ibv_context*, ibv_cq_init_attr_ex*);
int verb_destroy_cq(ibv_cq*);
int verb_poll_cq(ibv_cq*, int, ibv_wc*);
int verb_req_notify_cq(ibv_cq*, int);
void verb_cq_event(ibv_cq*);
int verb_query_rt_values(ibv_context*, ibv_values_ex*);
int verb_resize_cq(ibv_cq*, int);
// The device clock of completion timestamps: CLOCK_MONOTONIC in nanoseconds, so
// ibv_device_attr_ex.hca_core_clock is 1000000 kHz.
uint64_t device_clock_ns();
inline constexpr uint64_t kDeviceClockKhz = 1000000;
// sroce_cqe.reserved0 is 0 from the daemon; the provider marks entries it must skip.
inline constexpr uint8_t kCqeDiscarded = 1;
void cq_discard_qp(Cq* cq, uint32_t qpn);
void cq_attach_qp(Cq* cq, Qp* qp);
void cq_detach_qp(Cq* cq, Qp* qp);
// qp.cc
ibv_qp* verb_create_qp(ibv_pd*, ibv_qp_init_attr*);
ibv_qp* verb_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*);
int verb_modify_qp(ibv_qp*, ibv_qp_attr*, int);
int verb_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*);
int verb_destroy_qp(ibv_qp*);
// post.cc
int verb_post_send(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
int verb_post_recv(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**);
int verb_post_srq_recv(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**);
// wr_api.cc
void qp_ex_install(Qp* qp);

}  // namespace sroce::provider

#endif  // SROCE_PROVIDER_PROVIDER_H
