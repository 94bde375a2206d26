// Registration with libibverbs, device and context lifetime, device/port queries, and the
// context's watcher thread (async events, daemon death).
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "provider.h"
#include "shim_hooks.h"

namespace sroce::provider {
namespace {

// The device is claimed by name: the generated sysfs view has no modalias and, without the
// kernel module, netlink reports no driver id. libibverbs matches "rdma_device:N<ibdev>".
const verbs_match_ent kMatchTable[] = {
    {nullptr, {"rdma_device:*Nsroce*"}, 0, 0, kVerbsMatchModalias},
    {nullptr, {nullptr}, 0, 0, kVerbsMatchSentinel},
};

verbs_context* alloc_context(ibv_device* device, int cmd_fd, void* private_data);
verbs_device* alloc_device(verbs_sysfs_dev* sysfs_dev);
void uninit_device(verbs_device* device);
void free_context(ibv_context* ibctx);

const verbs_device_ops kDeviceOps = {
    "sroce",
    0,  // match_min_abi_version: the generated sysfs view says 1; accept a missing file too
    1,       kMatchTable, nullptr, nullptr, alloc_context, nullptr, alloc_device, uninit_device,
};

verbs_context_ops make_context_ops() {
  verbs_context_ops ops{};
  ops.alloc_pd = verb_alloc_pd;
  ops.alloc_parent_domain = verb_alloc_parent_domain;
  ops.async_event = verb_async_event;
  ops.cq_event = verb_cq_event;
  ops.create_ah = verb_create_ah;
  ops.create_cq = verb_create_cq;
  ops.create_cq_ex = verb_create_cq_ex;
  ops.create_qp = verb_create_qp;
  ops.create_qp_ex = verb_create_qp_ex;
  ops.create_srq = verb_create_srq;
  ops.dealloc_pd = verb_dealloc_pd;
  ops.dereg_mr = verb_dereg_mr;
  ops.destroy_ah = verb_destroy_ah;
  ops.destroy_cq = verb_destroy_cq;
  ops.destroy_qp = verb_destroy_qp;
  ops.destroy_srq = verb_destroy_srq;
  ops.free_context = free_context;
  ops.modify_qp = verb_modify_qp;
  ops.modify_srq = verb_modify_srq;
  ops.poll_cq = verb_poll_cq;
  ops.post_recv = verb_post_recv;
  ops.post_send = verb_post_send;
  ops.post_srq_recv = verb_post_srq_recv;
  ops.query_device_ex = verb_query_device_ex;
  ops.query_port = verb_query_port;
  ops.query_qp = verb_query_qp;
  ops.query_rt_values = verb_query_rt_values;
  ops.query_srq = verb_query_srq;
  ops.reg_mr = verb_reg_mr;
  ops.req_notify_cq = verb_req_notify_cq;
  ops.rereg_mr = verb_rereg_mr;
  ops.resize_cq = verb_resize_cq;
  ops.alloc_mw = verb_alloc_mw;
  ops.dealloc_mw = verb_dealloc_mw;
  ops.bind_mw = verb_bind_mw;
  return ops;
}
const verbs_context_ops kContextOps = make_context_ops();

// The kernel path (kernel_path.cc): the verbs that are plain uverbs commands there. The others
// keep the socket path's entry points, which branch where creation differs.
verbs_context_ops make_kernel_ops() {
  verbs_context_ops ops = make_context_ops();
  ops.query_device_ex = kernel_query_device_ex;
  ops.query_port = kernel_query_port;
  ops.alloc_pd = kernel_alloc_pd;
  ops.dealloc_pd = kernel_dealloc_pd;
  ops.reg_mr = kernel_reg_mr;
  ops.dereg_mr = kernel_dereg_mr;
  ops.rereg_mr = kernel_rereg_mr;
  ops.create_ah = kernel_create_ah;
  ops.destroy_ah = kernel_destroy_ah;
  ops.alloc_mw = kernel_alloc_mw;
  ops.dealloc_mw = kernel_dealloc_mw;
  return ops;
}
const verbs_context_ops kKernelOps = make_kernel_ops();

int owns_context(ibv_context* context) {
  auto* vdev = reinterpret_cast<verbs_device*>(context->device);
  return vdev != nullptr && vdev->ops == &kDeviceOps;
}

const sroce_shim_hooks kShimHooks = {
    SROCE_SHIM_HOOKS_VERSION,
    owns_context,
    verb_create_comp_channel,
    verb_destroy_comp_channel,
};

__attribute__((constructor)) void register_driver() {
  verbs_register_driver_34(&kDeviceOps);
  // The shim is preloaded into the global scope when sroce-run set it up.
  auto reg =
      reinterpret_cast<sroce_shim_register_fn>(dlsym(RTLD_DEFAULT, SROCE_SHIM_REGISTER_SYMBOL));
  if (reg != nullptr) reg(&kShimHooks);
}

verbs_device* alloc_device(verbs_sysfs_dev*) {
  auto* dev = new (std::nothrow) Device();
  if (dev == nullptr) return nullptr;
  return &dev->vdev;
}

void uninit_device(verbs_device* vdev) { delete reinterpret_cast<Device*>(vdev); }

void send_record(int fd, uint64_t element, uint32_t type) {
  sroce_async_event_desc ev{};
  ev.element = element;
  ev.event_type = type;
  ssize_t n;
  do {
    n = send(fd, &ev, sizeof(ev), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
}

// The daemon is gone: nothing will complete, flush or notify any more. Make that visible the
// way a dead HCA does (IBA 11.6, unaffiliated asynchronous events): one
// IBV_EVENT_DEVICE_FATAL, and every outstanding work request completes with
// IBV_WC_WR_FLUSH_ERR (cq.cc makes those up once the CQ ring is drained).
void declare_dead(ContextState* st) {
  if (st->dead.exchange(true)) return;
  st->control.mark_dead();
  send_record(st->inject_fd, 1, IBV_EVENT_DEVICE_FATAL);
}

void* watcher_main(void* arg) {
  auto* st = static_cast<ContextState*>(arg);
  uint8_t buf[sizeof(sroce_async_event_desc) * 64];
  size_t have = 0;  // bytes of a record split across reads (stream sockets)
  bool async_open = true;
  for (;;) {
    pollfd pfd[3] = {{st->control.fd(), POLLRDHUP, 0},
                     {async_open ? st->daemon_async_fd : -1, POLLIN, 0},
                     {st->stop_fd, POLLIN, 0}};
    int n = poll(pfd, 3, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfd[2].revents != 0) break;
    if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = read(st->daemon_async_fd, buf + have, sizeof(buf) - have);
      if (got > 0) {
        have += static_cast<size_t>(got);
        size_t off = 0;
        while (have - off >= sizeof(sroce_async_event_desc)) {
          // Never block here: an app that does not read its async events must not stop the
          // watcher (it would then miss the daemon's death and hang free_context). When the
          // socket is full (hundreds of unread events) the event is dropped rather than waited on.
          ssize_t w;
          do {
            w = send(st->inject_fd, buf + off, sizeof(sroce_async_event_desc),
                     MSG_NOSIGNAL | MSG_DONTWAIT);
          } while (w < 0 && errno == EINTR);
          off += sizeof(sroce_async_event_desc);
        }
        memmove(buf, buf + off, have - off);
        have -= off;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        async_open = false;
        declare_dead(st);
      }
    }
    if (pfd[0].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) declare_dead(st);
    if (st->dead.load() && !async_open) {
      // Nothing left to forward; wait for free_context only.
      pollfd stop{st->stop_fd, POLLIN, 0};
      while (poll(&stop, 1, -1) < 0 && errno == EINTR) {
      }
      break;
    }
    if (st->dead.load()) async_open = false;
  }
  return nullptr;
}

void destroy_state(Context* ctx) {
  ContextState* st = ctx->st;
  if (st == nullptr) return;
  if (st->watcher_started) {
    uint64_t one = 1;
    ssize_t w = write(st->stop_fd, &one, sizeof(one));
    (void)w;
    pthread_join(st->watcher, nullptr);
  }
  for (int fd : {st->daemon_async_fd, st->inject_fd, st->doorbell_fd, st->stop_fd})
    if (fd >= 0) close(fd);
  delete st;
  ctx->st = nullptr;
}

int setup_context(Context* ctx, const char* devname) {
  ContextState* st = ctx->st;
  std::string path = control_socket_path(devname);
  int err = st->control.connect_to(path);
  if (err != 0) {
    fprintf(stderr, "libsroce: cannot reach sroced for %s at %s: %s\n", devname, path.c_str(),
            strerror(err));
    return err;
  }
  sroce_hello_resp resp{};
  ReplyFds fds;
  err = st->control.hello(&resp, &fds);
  if (err != 0) return err;
  if (resp.abi_version != SROCE_ABI_VERSION || fds.count < 2) {
    fprintf(stderr, "libsroce: sroced speaks ABI %u with %d fds, need %u with 2\n",
            resp.abi_version, fds.count, SROCE_ABI_VERSION);
    return EPROTO;
  }
  st->daemon_async_fd = fds.take(0);
  st->doorbell_fd = fds.take(1);
  err = st->control.call(SROCE_OP_QUERY_DEVICE, nullptr, 0, &st->dev_attr, sizeof(st->dev_attr));
  if (err != 0) return err;

  // The application's async fd is ours (a socket pair), not the daemon's: when the daemon
  // dies somebody must still be able to write IBV_EVENT_DEVICE_FATAL into it.
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return errno;
  ctx->vctx.context.async_fd = pair[0];
  st->inject_fd = pair[1];
  st->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (st->stop_fd < 0) return errno;
  // The watcher must not take the application's signals (perftest's SIGALRM, a program's
  // SIGINT handler expecting EINTR in its own thread): it starts with all of them blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&st->watcher, nullptr, watcher_main, st);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return EAGAIN;
  st->watcher_started = true;
  return 0;
}

verbs_context* alloc_context(ibv_device* device, int cmd_fd, void*) {
  auto* ctx = static_cast<Context*>(
      _verbs_init_and_alloc_context(device, cmd_fd, sizeof(Context), nullptr, 0));
  if (ctx == nullptr) return nullptr;
  ctx->st = new (std::nothrow) ContextState();
  // With rdma_sroce.ko the command fd is the kernel's uverbs device (docs/kmod.md).
  int err = ctx->st == nullptr      ? ENOMEM
            : kernel_device(cmd_fd) ? kernel_setup_context(ctx, device->name)
                                    : setup_context(ctx, device->name);
  if (err != 0) {
    destroy_state(ctx);
    verbs_uninit_context(&ctx->vctx);
    free(ctx);
    errno = err;
    return nullptr;
  }
  ctx->vctx.context.num_comp_vectors = 1;
  verbs_set_ops(&ctx->vctx, ctx->st->kernel ? &kKernelOps : &kContextOps);
  return &ctx->vctx;
}

void free_context(ibv_context* ibctx) {
  Context* ctx = to_ctx(ibctx);
  destroy_state(ctx);
  verbs_uninit_context(&ctx->vctx);  // closes cmd_fd and the app's async fd
  free(ctx);
}

}  // namespace

void ring_doorbell(Context* ctx, const RingView& ring, uint32_t kcmd, uint32_t khandle) {
  if (!ring.consumer_sleeping()) return;
  if (ctx->st->kernel) {
    kernel_doorbell(ctx, kcmd, khandle);
    return;
  }
  uint64_t one = 1;
  ssize_t w = write(ctx->st->doorbell_fd, &one, sizeof(one));
  (void)w;  // EAGAIN means the count is already huge: the daemon will wake anyway
}

int verb_query_device_ex(ibv_context* ibctx, const ibv_query_device_ex_input* input,
                         ibv_device_attr_ex* attr, size_t attr_size) {
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  if (attr_size < sizeof(attr->orig_attr)) return EINVAL;
  const sroce_device_attr& d = to_ctx(ibctx)->st->dev_attr;
  memset(attr, 0, attr_size);
  ibv_device_attr& a = attr->orig_attr;
  snprintf(a.fw_ver, sizeof(a.fw_ver), "%u.%u.%u", unsigned((d.fw_ver >> 32) & 0xffff),
           unsigned((d.fw_ver >> 16) & 0xffff), unsigned(d.fw_ver & 0xffff));
  a.node_guid = d.node_guid;
  a.sys_image_guid = d.sys_image_guid;
  a.max_mr_size = d.max_mr_size;
  a.page_size_cap = d.page_size_cap;
  a.vendor_id = d.vendor_id;
  a.vendor_part_id = d.vendor_part_id;
  a.hw_ver = d.hw_ver;
  a.max_qp = static_cast<int>(d.max_qp);
  a.max_qp_wr = static_cast<int>(d.max_qp_wr);
  a.device_cap_flags = d.device_cap_flags;
  a.max_sge = static_cast<int>(d.max_sge);
  a.max_sge_rd = static_cast<int>(d.max_sge);
  a.max_cq = static_cast<int>(d.max_cq);
  a.max_cqe = static_cast<int>(d.max_cqe);
  a.max_mr = static_cast<int>(d.max_mr);
  a.max_mw = static_cast<int>(d.max_mr);  // windows share the engine's MR table (mw.cc)
  a.max_pd = static_cast<int>(d.max_pd);
  a.max_qp_rd_atom = static_cast<int>(d.max_qp_rd_atom);
  a.max_res_rd_atom = static_cast<int>(d.max_qp_rd_atom * d.max_qp);
  a.max_qp_init_rd_atom = static_cast<int>(d.max_qp_init_rd_atom);
  a.atomic_cap = static_cast<ibv_atomic_cap>(d.atomic_cap);
  a.max_ah = static_cast<int>(d.max_ah);
  a.max_srq = static_cast<int>(d.max_srq);
  a.max_srq_wr = static_cast<int>(d.max_srq_wr);
  a.max_srq_sge = static_cast<int>(d.max_srq_sge);
  a.max_pkeys = d.max_pkeys;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = d.phys_port_cnt;
  if (attr_size >= offsetof(ibv_device_attr_ex, device_cap_flags_ex) + sizeof(uint64_t))
    attr->device_cap_flags_ex = d.device_cap_flags;
  if (attr_size >= offsetof(ibv_device_attr_ex, phys_port_cnt_ex) + sizeof(uint32_t))
    attr->phys_port_cnt_ex = d.phys_port_cnt;
  // Completion timestamps (sroce_cqe.timestamp): a 64-bit nanosecond clock, i.e. 1 GHz.
  if (attr_size >= offsetof(ibv_device_attr_ex, hca_core_clock) + sizeof(uint64_t)) {
    attr->completion_timestamp_mask = ~uint64_t{0};
    attr->hca_core_clock = kDeviceClockKhz;
  }
  return 0;
}

int verb_query_port(ibv_context* ibctx, uint8_t port_num, ibv_port_attr* attr) {
  sroce_query_port req{};
  req.port_num = port_num;
  sroce_port_attr p{};
  int err = to_ctx(ibctx)->st->control.call(SROCE_OP_QUERY_PORT, &req, sizeof(req), &p, sizeof(p));
  if (err != 0) return err;
  memset(attr, 0, sizeof(*attr));
  attr->state = static_cast<ibv_port_state>(p.state);
  attr->max_mtu = static_cast<ibv_mtu>(p.max_mtu);
  attr->active_mtu = static_cast<ibv_mtu>(p.active_mtu);
  attr->gid_tbl_len = static_cast<int>(p.gid_tbl_len);
  attr->port_cap_flags = p.port_cap_flags;
  attr->max_msg_sz = p.max_msg_sz;
  attr->pkey_tbl_len = p.pkey_tbl_len;
  attr->active_width = p.active_width;
  attr->active_speed = p.active_speed;
  attr->phys_state = p.phys_state;
  attr->link_layer = p.link_layer;
  attr->max_vl_num = 1;
  return 0;
}

void verb_async_event(ibv_context* ibctx, ibv_async_event* event) {
  Context* ctx = to_ctx(ibctx);
  // Seen once: from now on destroy_qp waits for the app to ack its QP's events, as the
  // kernel does (an app that never reads events could never ack them, so it is not made to).
  ctx->st->async_read.store(true, std::memory_order_release);
  (void)event;
}

}  // namespace sroce::provider
