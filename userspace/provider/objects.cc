// PD, MR, AH, SRQ and completion channels: control messages to sroced, nothing else.
#include <errno.h>
#include <rdma/ib_user_verbs.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>

#include "provider.h"

namespace sroce::provider {

int Mapping::map(int memfd, size_t len) {
  if (memfd < 0) return EPROTO;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  int err = errno;
  close(memfd);
  if (p == MAP_FAILED) return err;
  addr = p;
  bytes = len;
  return 0;
}

void Mapping::unmap() {
  if (addr != nullptr) munmap(addr, bytes);
  addr = nullptr;
  bytes = 0;
}

void Shadow::init(uint32_t cap) {
  uint32_t n = 1;
  while (n < cap) n <<= 1;
  entries.assign(n, Entry{});
  capacity = cap;
  head.store(0);
  tail.store(0);
}

namespace {

// Checks a ring header the daemon wrote before the provider trusts its geometry.
bool ring_fits(const Mapping& m, uint64_t offset, uint32_t min_entry) {
  if (offset > m.bytes || m.bytes - offset < sizeof(sroce_ring)) return false;
  auto* hdr = reinterpret_cast<const sroce_ring*>(static_cast<uint8_t*>(m.addr) + offset);
  uint32_t size = hdr->size;
  uint32_t esz = hdr->entry_size;
  if (size == 0 || (size & (size - 1)) != 0 || esz < min_entry || esz % 16 != 0) return false;
  return RingView::bytes_for(size, esz) <= m.bytes - offset;
}

// Completes a destroy: after the daemon died there is nobody left to refuse it, so the local
// object is released and the verb succeeds (as libibverbs does for a disassociated device
// with RDMAV_ALLOW_DISASSOC_DESTROY).
int destroy_status(int err) { return err == EIO ? 0 : err; }

}  // namespace

bool ring_geometry_ok(const Mapping& m, uint64_t offset, uint32_t min_entry) {
  return ring_fits(m, offset, min_entry);
}

ibv_pd* verb_alloc_pd(ibv_context* ibctx) {
  sroce_handle_resp resp{};
  int err = to_ctx(ibctx)->st->control.call(SROCE_OP_ALLOC_PD, nullptr, 0, &resp, sizeof(resp));
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) {
    sroce_handle_req req{resp.handle, 0};
    to_ctx(ibctx)->st->control.call(SROCE_OP_DEALLOC_PD, &req, sizeof(req), nullptr, 0);
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.handle = resp.handle;
  return &pd->pd;
}

// A parent domain (libibverbs' ibv_alloc_parent_domain): a PD that carries a thread domain
// and allocators for the provider's own buffers. The rings come from sroced or the module,
// never from the program's allocators, and there are no thread domains (alloc_td is not
// offered), so a parent domain is its protection domain under another ibv_pd.
ibv_pd* verb_alloc_parent_domain(ibv_context* ibctx, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr == nullptr || attr->pd == nullptr || attr->pd->context != ibctx || (attr->comp_mask & ~kKnown)) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->td != nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = ibctx;
  pd->pd.handle = attr->pd->handle;
  pd->parent_domain = true;
  return &pd->pd;
}

int verb_dealloc_pd(ibv_pd* ibpd) {
  if (to_pd(ibpd)->parent_domain) {
    delete to_pd(ibpd);
    return 0;
  }
  sroce_handle_req req{ibpd->handle, 0};
  int err =
      to_ctx(ibpd->context)->st->control.call(SROCE_OP_DEALLOC_PD, &req, sizeof(req), nullptr, 0);
  err = destroy_status(err);
  if (err == 0) delete to_pd(ibpd);
  return err;
}

// Access rules of IBA 10.6: remote write or remote atomic access needs local write access.
// The flags sroce does not implement are refused with EOPNOTSUPP so that callers can tell
// "unsupported" from "invalid". Returns 0 or the errno value; *out gets the flags to send.
int check_access(int access, int* out) {
  constexpr int kSupported = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                             IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND;
  const int requested = access & ~IBV_ACCESS_OPTIONAL_RANGE;  // optional: may be ignored
  if ((requested & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(requested & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  if (requested & ~kSupported) return EOPNOTSUPP;
  *out = requested;
  return 0;
}

ibv_mr* verb_reg_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t hca_va, int access) {
  int requested = 0;
  if (int err = check_access(access, &requested); err != 0) {
    errno = err;
    return nullptr;
  }
  sroce_reg_mr req{};
  req.addr = reinterpret_cast<uintptr_t>(addr);
  req.length = length;
  req.iova = (requested & IBV_ACCESS_ZERO_BASED) ? 0 : hca_va;
  req.pd = ibpd->handle;
  req.access = static_cast<uint32_t>(requested);
  sroce_reg_mr_resp resp{};
  int err = to_ctx(ibpd->context)
                ->st->control.call(SROCE_OP_REG_MR, &req, sizeof(req), &resp, sizeof(resp));
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* mr = new (std::nothrow) Mr();
  if (mr == nullptr) {
    sroce_handle_req dreq{resp.lkey, 0};
    to_ctx(ibpd->context)->st->control.call(SROCE_OP_DEREG_MR, &dreq, sizeof(dreq), nullptr, 0);
    errno = ENOMEM;
    return nullptr;
  }
  mr->vmr.ibv_mr.handle = resp.lkey;
  mr->vmr.ibv_mr.lkey = resp.lkey;
  mr->vmr.ibv_mr.rkey = resp.rkey;
  mr->vmr.mr_type = kVerbsMrTypeMr;
  mr->vmr.access = access;
  share_mr_pages(to_ctx(ibpd->context), resp.lkey, addr, length);
  return &mr->vmr.ibv_mr;
}

int verb_dereg_mr(verbs_mr* vmr) {
  sroce_handle_req req{vmr->ibv_mr.handle, 0};
  int err = to_ctx(vmr->ibv_mr.context)
                ->st->control.call(SROCE_OP_DEREG_MR, &req, sizeof(req), nullptr, 0);
  err = destroy_status(err);
  if (err == 0) {
    forget_mr_pages(to_ctx(vmr->ibv_mr.context), vmr->ibv_mr.handle);
    delete reinterpret_cast<Mr*>(vmr);
  }
  return err;
}

// ibv_rereg_mr: the daemon changes the registration in place and keeps its keys (programs do
// not exchange them again). A daemon without the operation answers EOPNOTSUPP.
int verb_rereg_mr(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  int requested = vmr->access & ~IBV_ACCESS_OPTIONAL_RANGE;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    if (int err = check_access(access, &requested); err != 0) {
      errno = err;
      return err;
    }
  }
  ibv_mr& mr = vmr->ibv_mr;
  sroce_rereg_mr req{};
  req.lkey = mr.handle;
  req.flags = static_cast<uint32_t>(flags);
  req.addr = reinterpret_cast<uintptr_t>(addr);
  req.length = length;
  req.iova = (requested & IBV_ACCESS_ZERO_BASED) ? 0 : reinterpret_cast<uintptr_t>(addr);
  req.pd = (flags & IBV_REREG_MR_CHANGE_PD) && pd != nullptr ? pd->handle : 0;
  req.access = static_cast<uint32_t>(requested);
  sroce_reg_mr_resp resp{};
  int err = to_ctx(mr.context)
                ->st->control.call(SROCE_OP_REREG_MR, &req, sizeof(req), &resp, sizeof(resp));
  if (err != 0) {
    errno = err;
    return err;
  }
  mr.handle = resp.lkey;
  mr.lkey = resp.lkey;
  mr.rkey = resp.rkey;
  // sroced drops its shared mapping when the range or the rights change (service_objects.cc);
  // mr.addr and mr.length are still the old ones here (libibverbs sets them after).
  const bool moved = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr != mr.addr || length != mr.length);
  const bool rights = requested != (vmr->access & ~IBV_ACCESS_OPTIONAL_RANGE);
  if (moved || rights)
    rereg_mr_pages(to_ctx(mr.context), mr.handle, moved ? addr : mr.addr, moved ? length : mr.length, true);
  else if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
    rereg_mr_pages(to_ctx(mr.context), mr.handle, addr, length, false);
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) vmr->access = access;
  return 0;
}

void fill_ah_attr(sroce_ah_attr* out, const ibv_ah_attr& in) {
  memcpy(out->dgid, in.grh.dgid.raw, sizeof(out->dgid));
  out->flow_label = in.grh.flow_label;
  out->sgid_index = in.grh.sgid_index;
  out->hop_limit = in.grh.hop_limit;
  out->traffic_class = in.grh.traffic_class;
  out->sl = in.sl;
  out->port_num = in.port_num;
  out->is_global = in.is_global;
}

void read_ah_attr(ibv_ah_attr* out, const sroce_ah_attr& in) {
  memset(out, 0, sizeof(*out));
  memcpy(out->grh.dgid.raw, in.dgid, sizeof(in.dgid));
  out->grh.flow_label = in.flow_label;
  out->grh.sgid_index = in.sgid_index;
  out->grh.hop_limit = in.hop_limit;
  out->grh.traffic_class = in.traffic_class;
  out->sl = in.sl;
  out->port_num = in.port_num;
  out->is_global = in.is_global;
}

// RoCE addresses are GIDs: an address handle without a GRH cannot be routed (Annex A17: RoCEv2
// packets always carry the routing header).
ibv_ah* verb_create_ah(ibv_pd* ibpd, ibv_ah_attr* attr) {
  if (!attr->is_global) {
    errno = EINVAL;
    return nullptr;
  }
  sroce_create_ah req{};
  req.pd = ibpd->handle;
  fill_ah_attr(&req.attr, *attr);
  sroce_handle_resp resp{};
  int err = to_ctx(ibpd->context)
                ->st->control.call(SROCE_OP_CREATE_AH, &req, sizeof(req), &resp, sizeof(resp));
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* ah = new (std::nothrow) Ah();
  if (ah == nullptr) {
    sroce_handle_req dreq{resp.handle, 0};
    to_ctx(ibpd->context)->st->control.call(SROCE_OP_DESTROY_AH, &dreq, sizeof(dreq), nullptr, 0);
    errno = ENOMEM;
    return nullptr;
  }
  ah->ah.handle = resp.handle;
  ah->wqe_handle = resp.handle;
  return &ah->ah;
}

int verb_destroy_ah(ibv_ah* ibah) {
  sroce_handle_req req{ibah->handle, 0};
  int err =
      to_ctx(ibah->context)->st->control.call(SROCE_OP_DESTROY_AH, &req, sizeof(req), nullptr, 0);
  err = destroy_status(err);
  if (err == 0) delete to_ah(ibah);
  return err;
}

ibv_srq* verb_create_srq(ibv_pd* ibpd, ibv_srq_init_attr* init) {
  Context* ctx = to_ctx(ibpd->context);
  const sroce_device_attr& d = ctx->st->dev_attr;
  if (init->attr.max_wr == 0 || init->attr.max_wr > d.max_srq_wr ||
      init->attr.max_sge > d.max_srq_sge) {
    errno = EINVAL;
    return nullptr;
  }
  auto* srq = new (std::nothrow) Srq();
  if (srq == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  sroce_create_srq_resp resp{};
  int err = 0;
  if (ctx->st->kernel) {
    err = kernel_create_srq(ctx, srq, ibpd, init, &resp);
    if (err != 0) {
      delete srq;
      errno = err;
      return nullptr;
    }
  } else {
  sroce_create_srq req{};
  req.pd = ibpd->handle;
  req.max_wr = init->attr.max_wr;
  req.max_sge = init->attr.max_sge;
  req.srq_limit = init->attr.srq_limit;
  req.user_handle = reinterpret_cast<uintptr_t>(&srq->srq);
  ReplyFds fds;
  err = ctx->st->control.call(SROCE_OP_CREATE_SRQ, &req, sizeof(req), &resp, sizeof(resp), &fds);
  if (err == 0) err = srq->mapping.map(fds.take(0), resp.ring_bytes);
  if (err == 0 &&
      !ring_fits(srq->mapping, 0, sizeof(sroce_recv_wqe) + sizeof(sroce_sge) * resp.max_sge))
    err = EPROTO;
  if (err != 0) {
    if (resp.handle != 0) {
      sroce_handle_req dreq{resp.handle, 0};
      ctx->st->control.call(SROCE_OP_DESTROY_SRQ, &dreq, sizeof(dreq), nullptr, 0);
    }
    srq->mapping.unmap();
    delete srq;
    errno = err;
    return nullptr;
  }
  }
  srq->ctx = ctx;
  srq->handle = resp.handle;
  srq->max_wr = resp.max_wr;
  srq->max_sge = resp.max_sge;
  srq->ring = RingView(srq->mapping.addr);
  srq->srq.handle = resp.handle;  // the kernel's uverbs handle on the kernel path
  init->attr.max_wr = resp.max_wr;
  init->attr.max_sge = resp.max_sge;
  return &srq->srq;
}

int verb_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
  Srq* srq = to_srq(ibsrq);
  // The ring was sized at creation; growing it would need a new mapping.
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;
  if (mask & ~IBV_SRQ_LIMIT) return EINVAL;
  if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > srq->max_wr) return EINVAL;
  if (srq->ctx->st->kernel) {
    alignas(8) uint8_t cmd[sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_modify_srq)] = {};
    return ibv_cmd_modify_srq(ibsrq, attr, mask, cmd, sizeof(cmd));
  }
  sroce_modify_srq req{};
  req.handle = srq->handle;
  req.attr_mask = static_cast<uint32_t>(mask);
  req.max_wr = attr->max_wr;
  req.srq_limit = attr->srq_limit;
  return srq->ctx->st->control.call(SROCE_OP_MODIFY_SRQ, &req, sizeof(req), nullptr, 0);
}

int verb_query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr) {
  Srq* srq = to_srq(ibsrq);
  if (srq->ctx->st->kernel) {
    alignas(8) uint8_t cmd[sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_query_srq)] = {};
    return ibv_cmd_query_srq(ibsrq, attr, cmd, sizeof(cmd));
  }
  sroce_handle_req req{srq->handle, 0};
  sroce_srq_attr resp{};
  int err = srq->ctx->st->control.call(SROCE_OP_QUERY_SRQ, &req, sizeof(req), &resp, sizeof(resp));
  if (err != 0) return err;
  attr->max_wr = resp.max_wr;
  attr->max_sge = resp.max_sge;
  attr->srq_limit = resp.srq_limit;
  return 0;
}

int verb_destroy_srq(ibv_srq* ibsrq) {
  Srq* srq = to_srq(ibsrq);
  sroce_handle_req req{srq->handle, 0};
  int err = srq->ctx->st->kernel
                ? ibv_cmd_destroy_srq(ibsrq)
                : destroy_status(srq->ctx->st->control.call(SROCE_OP_DESTROY_SRQ, &req,
                                                            sizeof(req), nullptr, 0));
  if (err != 0) return err;
  srq->mapping.unmap();
  delete srq;
  return 0;
}

ibv_comp_channel* verb_create_comp_channel(ibv_context* ibctx) {
  Context* ctx = to_ctx(ibctx);
  sroce_handle_resp resp{};
  ReplyFds fds;
  int err =
      ctx->st->control.call(SROCE_OP_CREATE_COMP_CHANNEL, nullptr, 0, &resp, sizeof(resp), &fds);
  if (err == 0 && fds.count < 1) err = EPROTO;
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* ch = new (std::nothrow) CompChannel();
  if (ch == nullptr) {
    sroce_handle_req dreq{resp.handle, 0};
    ctx->st->control.call(SROCE_OP_DESTROY_COMP_CHANNEL, &dreq, sizeof(dreq), nullptr, 0);
    errno = ENOMEM;
    return nullptr;
  }
  ch->channel.context = ibctx;
  ch->channel.fd = fds.take(0);
  ch->channel.refcnt = 0;
  ch->handle = resp.handle;
  return &ch->channel;
}

int verb_destroy_comp_channel(ibv_comp_channel* channel) {
  ibv_context* ibctx = channel->context;
  // libibverbs counts the CQs using a channel under the context mutex (ibv_create_cq and
  // ibv_destroy_cq); a channel still in use cannot go.
  pthread_mutex_lock(&ibctx->mutex);
  int busy = channel->refcnt;
  pthread_mutex_unlock(&ibctx->mutex);
  if (busy != 0) return EBUSY;
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  sroce_handle_req req{ch->handle, 0};
  int err = destroy_status(to_ctx(ibctx)->st->control.call(SROCE_OP_DESTROY_COMP_CHANNEL, &req,
                                                           sizeof(req), nullptr, 0));
  if (err != 0) return err;
  close(ch->channel.fd);
  delete ch;
  return 0;
}

}  // namespace sroce::provider
