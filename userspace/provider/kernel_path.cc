// The kernel path of libsroce (docs/kmod.md, "What the other components must add: libsroce"):
// with rdma_sroce.ko loaded, sroce0 is a real uverbs device. Objects are created with the
// kernel's uverbs commands (libibverbs' ibv_cmd_* helpers, with the driver data of
// sroce_abi.h), the module mirrors them to sroced, and the rings the provider posts into and
// polls come from mmap of the uverbs fd. Everything after creation (posting, polling, shadows,
// flushing) is the socket path's code, unchanged: only where the memory comes from differs.
// Completion channels and async events are libibverbs' own on a real device.
#include <errno.h>
#include <rdma/ib_user_verbs.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <new>

#include "provider.h"

namespace sroce::provider {
namespace {

// libibverbs' command buffer: the write() header, then the kernel's request. The kernel's
// structs end in flexible arrays (C++ cannot nest them), so these are bytes of the right size.
template <typename Req>
struct CmdBuf {
  alignas(8) uint8_t bytes[sizeof(ib_uverbs_cmd_hdr) + sizeof(Req)] = {};
};

// The kernel's response followed by our driver data (sroce_abi.h, "Driver data").
template <typename Core, typename Drv>
struct RespBuf {
  alignas(8) uint8_t bytes[sizeof(Core) + sizeof(Drv)] = {};
  Drv drv() const {
    Drv d;
    memcpy(&d, bytes + sizeof(Core), sizeof(d));
    return d;
  }
};

// Maps `bytes` of the uverbs fd at `offset` (a ring the module allocated).
int map_ring(Context* ctx, Mapping* m, uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return EPROTO;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->vctx.context.cmd_fd,
                 static_cast<off_t>(offset));
  if (p == MAP_FAILED) return errno;
  m->addr = p;
  m->bytes = bytes;
  return 0;
}

}  // namespace

bool kernel_device(int cmd_fd) {
  // Under sroce-run the command fd is a stand-in (/dev/full's node, 1:7); with the module it is
  // the uverbs character device the kernel created for sroce0.
  struct stat st;
  if (fstat(cmd_fd, &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  return !(major(st.st_rdev) == 1 && minor(st.st_rdev) == 7);
}

int kernel_setup_context(Context* ctx, const char* devname) {
  CmdBuf<ib_uverbs_get_context> cmd;
  RespBuf<ib_uverbs_get_context_resp, sroce_kuctx_resp> resp;
  int err =
      ibv_cmd_get_context(&ctx->vctx, cmd.bytes, sizeof(cmd.bytes), resp.bytes, sizeof(resp.bytes));
  if (err == ENOTCONN) {
    fprintf(stderr, "libsroce: sroced is not running for %s (start sroced --netdev IFACE)\n",
            devname);
    return err;
  }
  if (err != 0) {
    fprintf(stderr, "libsroce: %s: GET_CONTEXT: %s\n", devname, strerror(err));
    return err;
  }
  if (resp.drv().abi_version != SROCE_KABI_VERSION) {
    fprintf(stderr, "libsroce: rdma_sroce speaks kernel ABI %u, this provider %u\n",
            resp.drv().abi_version, SROCE_KABI_VERSION);
    return EPROTO;
  }
  ctx->st->kernel = true;
  // The limits the provider checks before it asks (create_cq/qp/srq): the device's, as the
  // module reports them from sroced's attach.
  ibv_device_attr_ex attr{};
  ib_uverbs_ex_query_device_resp qresp{};
  size_t qsize = sizeof(qresp);
  err = ibv_cmd_query_device_any(&ctx->vctx.context, nullptr, &attr, sizeof(attr), &qresp, &qsize);
  if (err != 0) {
    fprintf(stderr, "libsroce: %s: QUERY_DEVICE: %s\n", devname, strerror(err));
    return err;
  }
  sroce_device_attr& d = ctx->st->dev_attr;
  const ibv_device_attr& a = attr.orig_attr;
  d.node_guid = a.node_guid;
  d.max_qp_wr = static_cast<uint32_t>(a.max_qp_wr);
  d.max_sge = static_cast<uint32_t>(a.max_sge);
  d.max_cqe = static_cast<uint32_t>(a.max_cqe);
  d.max_srq_wr = static_cast<uint32_t>(a.max_srq_wr);
  d.max_srq_sge = static_cast<uint32_t>(a.max_srq_sge);
  d.max_inline_data = UINT32_MAX;  // not in ibv_device_attr: the module checks it
  d.phys_port_cnt = a.phys_port_cnt;
  return 0;
}

void kernel_doorbell(Context* ctx, uint32_t kcmd, uint32_t khandle) {
  // POST_SEND, POST_RECV and POST_SRQ_RECV share this layout: response, handle, wr_count,
  // sge_count, wqe_size; with no work request the module only wakes sroced.
  alignas(8) uint8_t buf[sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_post_send)] = {};
  ib_uverbs_post_send_resp resp{};
  ib_uverbs_cmd_hdr hdr{};
  hdr.command = kcmd;
  hdr.in_words = sizeof(buf) / 4;
  hdr.out_words = sizeof(resp) / 4;
  ib_uverbs_post_send req{};
  req.response = reinterpret_cast<uintptr_t>(&resp);
  req.qp_handle = khandle;
  req.wqe_size =
      kcmd == IB_USER_VERBS_CMD_POST_SEND ? sizeof(ib_uverbs_send_wr) : sizeof(ib_uverbs_recv_wr);
  memcpy(buf, &hdr, sizeof(hdr));
  memcpy(buf + sizeof(hdr), &req, sizeof(req));
  ssize_t w = write(ctx->vctx.context.cmd_fd, buf, sizeof(buf));
  (void)w;  // a dead daemon shows in the rings' error flag
}

int kernel_query_device_ex(ibv_context* ibctx, const ibv_query_device_ex_input* input,
                           ibv_device_attr_ex* attr, size_t attr_size) {
  ib_uverbs_ex_query_device_resp resp{};
  size_t size = sizeof(resp);
  return ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp, &size);
}

int kernel_query_port(ibv_context* ibctx, uint8_t port, ibv_port_attr* attr) {
  CmdBuf<ib_uverbs_query_port> cmd;
  return ibv_cmd_query_port(ibctx, port, attr, cmd.bytes, sizeof(cmd.bytes));
}

ibv_pd* kernel_alloc_pd(ibv_context* ibctx) {
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  CmdBuf<ib_uverbs_alloc_pd> cmd;
  ib_uverbs_alloc_pd_resp resp{};
  int err = ibv_cmd_alloc_pd(ibctx, &pd->pd, cmd.bytes, sizeof(cmd.bytes), &resp, sizeof(resp));
  if (err != 0) {
    delete pd;
    errno = err;
    return nullptr;
  }
  return &pd->pd;
}

int kernel_dealloc_pd(ibv_pd* ibpd) {
  if (to_pd(ibpd)->parent_domain) return verb_dealloc_pd(ibpd);  // the wrapper only
  int err = ibv_cmd_dealloc_pd(ibpd);
  if (err == 0) delete to_pd(ibpd);
  return err;
}

ibv_mr* kernel_reg_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t hca_va, int access) {
  int requested = 0;
  if (int err = check_access(access, &requested); err != 0) {
    errno = err;
    return nullptr;
  }
  auto* mr = new (std::nothrow) Mr();
  if (mr == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  CmdBuf<ib_uverbs_reg_mr> cmd;
  ib_uverbs_reg_mr_resp resp{};
  uint64_t iova = (requested & IBV_ACCESS_ZERO_BASED) ? 0 : hca_va;
  int err = ibv_cmd_reg_mr(ibpd, addr, length, iova, requested, &mr->vmr, cmd.bytes,
                           sizeof(cmd.bytes), &resp, sizeof(resp));
  if (err != 0) {
    delete mr;
    errno = err;
    return nullptr;
  }
  mr->vmr.access = access;
  return &mr->vmr.ibv_mr;
}

// ibv_rereg_mr: the uverbs command; the module registers anew and ib_uverbs puts the new MR
// under the old handle, so the keys may change (ibv_cmd_rereg_mr stores them in the MR).
int kernel_rereg_mr(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  int requested = vmr->access & ~IBV_ACCESS_OPTIONAL_RANGE;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    if (int err = check_access(access, &requested); err != 0) {
      errno = err;
      return err;
    }
  }
  CmdBuf<ib_uverbs_rereg_mr> cmd;
  ib_uverbs_rereg_mr_resp resp{};
  uint64_t iova = (requested & IBV_ACCESS_ZERO_BASED) ? 0 : reinterpret_cast<uintptr_t>(addr);
  int err = ibv_cmd_rereg_mr(vmr, static_cast<uint32_t>(flags), addr, length, iova, requested, pd,
                             cmd.bytes, sizeof(cmd.bytes), &resp, sizeof(resp));
  if (err != 0) {
    errno = err;
    return err;
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) vmr->access = access;
  return 0;
}

int kernel_dereg_mr(verbs_mr* vmr) {
  int err = ibv_cmd_dereg_mr(vmr);
  if (err == 0) delete reinterpret_cast<Mr*>(vmr);
  return err;
}

ibv_ah* kernel_create_ah(ibv_pd* ibpd, ibv_ah_attr* attr) {
  auto* ah = new (std::nothrow) Ah();
  if (ah == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  RespBuf<ib_uverbs_create_ah_resp, sroce_kah_resp> resp;
  int err = ibv_cmd_create_ah(ibpd, &ah->ah, attr, resp.bytes, sizeof(resp.bytes));
  if (err != 0) {
    delete ah;
    errno = err;
    return nullptr;
  }
  ah->wqe_handle = resp.drv().handle;
  return &ah->ah;
}

int kernel_destroy_ah(ibv_ah* ibah) {
  int err = ibv_cmd_destroy_ah(ibah);
  if (err == 0) delete to_ah(ibah);
  return err;
}

int kernel_create_cq(Context* ctx, Cq* cq, int cqe, ibv_comp_channel* channel, int comp_vector,
                     sroce_create_cq_resp* out) {
  CmdBuf<ib_uverbs_create_cq> cmd;
  RespBuf<ib_uverbs_create_cq_resp, sroce_kring_resp> resp;
  int err = ibv_cmd_create_cq(&ctx->vctx.context, cqe, channel, comp_vector, &cq->vcq.cq, cmd.bytes,
                              sizeof(cmd.bytes), resp.bytes, sizeof(resp.bytes));
  if (err != 0) return err;
  sroce_kring_resp k = resp.drv();
  err = map_ring(ctx, &cq->mapping, k.mmap_offset, k.ring_bytes);
  if (err == 0 && !ring_geometry_ok(cq->mapping, 0, sizeof(sroce_cqe))) err = EPROTO;
  if (err != 0) {
    cq->mapping.unmap();
    ibv_cmd_destroy_cq(&cq->vcq.cq);
    return err;
  }
  out->handle = cq->vcq.cq.handle;
  out->cqe = static_cast<uint32_t>(cq->vcq.cq.cqe);
  out->ring_bytes = k.ring_bytes;
  return 0;
}

int kernel_resize_cq(Context* ctx, Cq* cq, int cqe, Mapping* out) {
  CmdBuf<ib_uverbs_resize_cq> cmd;
  RespBuf<ib_uverbs_resize_cq_resp, sroce_kring_resp> resp;
  int err = ibv_cmd_resize_cq(&cq->vcq.cq, cqe, cmd.bytes, sizeof(cmd.bytes), resp.bytes,
                              sizeof(resp.bytes));
  if (err != 0) return err;
  // The CQ has its new ring now (cq->vcq.cq.cqe is set): failing to map it leaves the CQ
  // unusable, so say so loudly rather than poll a ring sroced no longer fills.
  sroce_kring_resp k = resp.drv();
  err = map_ring(ctx, out, k.mmap_offset, k.ring_bytes);
  if (err == 0 && !ring_geometry_ok(*out, 0, sizeof(sroce_cqe))) err = EPROTO;
  if (err != 0) {
    out->unmap();
    fprintf(stderr, "libsroce: resize_cq: the new ring cannot be mapped: %s\n", strerror(err));
  }
  return err;
}

int kernel_create_srq(Context* ctx, Srq* srq, ibv_pd* pd, ibv_srq_init_attr* init,
                      sroce_create_srq_resp* out) {
  CmdBuf<ib_uverbs_create_srq> cmd;
  RespBuf<ib_uverbs_create_srq_resp, sroce_kring_resp> resp;
  ibv_srq_init_attr attr = *init;
  int err = ibv_cmd_create_srq(pd, &srq->srq, &attr, cmd.bytes, sizeof(cmd.bytes), resp.bytes,
                               sizeof(resp.bytes));
  if (err != 0) return err;
  sroce_kring_resp k = resp.drv();
  err = map_ring(ctx, &srq->mapping, k.mmap_offset, k.ring_bytes);
  if (err == 0 && !ring_geometry_ok(srq->mapping, 0,
                                    sizeof(sroce_recv_wqe) + sizeof(sroce_sge) * attr.attr.max_sge))
    err = EPROTO;
  if (err != 0) {
    srq->mapping.unmap();
    ibv_cmd_destroy_srq(&srq->srq);
    return err;
  }
  out->handle = srq->srq.handle;
  out->max_wr = attr.attr.max_wr;
  out->max_sge = attr.attr.max_sge;
  out->ring_bytes = k.ring_bytes;
  return 0;
}

int kernel_create_qp(Context* ctx, Qp* qp, ibv_qp_init_attr_ex* attr, sroce_create_qp_resp* out) {
  CmdBuf<ib_uverbs_create_qp> cmd;
  RespBuf<ib_uverbs_create_qp_resp, sroce_kqp_resp> resp;
  int err = ibv_cmd_create_qp_ex(&ctx->vctx.context, &qp->vqp, attr, cmd.bytes, sizeof(cmd.bytes),
                                 resp.bytes, sizeof(resp.bytes));
  if (err != 0) return err;
  // libibverbs fills the QPN and the granted caps (attr->cap) itself on both of its paths
  // (ioctl and write); the core response bytes are only written on the write path.
  sroce_kqp_resp k = resp.drv();
  const bool srq = attr->srq != nullptr;
  err = map_ring(ctx, &qp->mapping, k.mmap_offset, k.ring_bytes);
  if (err == 0 && !ring_geometry_ok(qp->mapping, k.sq_offset, sizeof(sroce_send_wqe))) err = EPROTO;
  if (err == 0 && !srq && !ring_geometry_ok(qp->mapping, k.rq_offset, sizeof(sroce_recv_wqe)))
    err = EPROTO;
  if (err != 0) {
    qp->mapping.unmap();
    ibv_cmd_destroy_qp(&qp->vqp.qp);
    return err;
  }
  out->qpn = qp->vqp.qp.qp_num;
  out->cap.max_send_wr = attr->cap.max_send_wr;
  out->cap.max_recv_wr = attr->cap.max_recv_wr;
  out->cap.max_send_sge = attr->cap.max_send_sge;
  out->cap.max_recv_sge = attr->cap.max_recv_sge;
  out->cap.max_inline_data = attr->cap.max_inline_data;
  out->ring_bytes = k.ring_bytes;
  out->sq_offset = k.sq_offset;
  out->rq_offset = k.rq_offset;
  return 0;
}

// Memory windows (mw.cc): uverbs ALLOC_MW / DEALLOC_MW; the module asks sroced and returns
// sroced's handle as driver data, which BIND_MW WQEs name.
ibv_mw* kernel_alloc_mw(ibv_pd* ibpd, ibv_mw_type type) {
  auto* mw = new (std::nothrow) Mw();
  if (mw == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  CmdBuf<ib_uverbs_alloc_mw> cmd;
  RespBuf<ib_uverbs_alloc_mw_resp, sroce_kmw_resp> resp;
  int err = ibv_cmd_alloc_mw(ibpd, type, &mw->mw, cmd.bytes, sizeof(cmd.bytes), resp.bytes,
                             sizeof(resp.bytes));
  if (err != 0) {
    delete mw;
    errno = err;
    return nullptr;
  }
  mw->wqe_handle = resp.drv().handle;
  return &mw->mw;
}

int kernel_dealloc_mw(ibv_mw* ibmw) {
  int err = ibv_cmd_dealloc_mw(ibmw);
  if (err == 0) delete reinterpret_cast<Mw*>(ibmw);
  return err;
}

}  // namespace sroce::provider
