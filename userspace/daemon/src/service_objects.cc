// Control verbs on objects: PD, MR, CQ, QP, SRQ, AH, completion channels.
// Check, then apply: every argument is validated (ownership first) before
// the engine is asked to change anything.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

namespace {

template <typename T>
bool body_as(std::span<const std::byte> body, T& out) {
  if (body.size() < sizeof(T)) return false;
  memcpy(&out, body.data(), sizeof(T));
  return true;
}

AhAttr to_engine(const sroce_ah_attr& a) {
  AhAttr r;
  memcpy(r.dgid.raw, a.dgid, 16);
  r.sgid_index = a.sgid_index;
  r.hop_limit = a.hop_limit;
  r.traffic_class = a.traffic_class;
  r.flow_label = a.flow_label;
  r.sl = a.sl;
  r.port_num = a.port_num;
  return r;
}

void from_engine(const AhAttr& a, sroce_ah_attr& r) {
  memcpy(r.dgid, a.dgid.raw, 16);
  r.sgid_index = a.sgid_index;
  r.hop_limit = a.hop_limit;
  r.traffic_class = a.traffic_class;
  r.flow_label = a.flow_label;
  r.sl = a.sl;
  r.port_num = a.port_num;
  r.is_global = 1;  // RoCE: every address handle carries a GRH
}

}  // namespace

int SharedMemory::create(const char* name, size_t len) {
  reset();
  len = round_up(len, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return -e;
  }
  base_ = p;
  len_ = len;
  fd_ = fd;
  return 0;
}

int Service::op_alloc_pd(Context& c, Reply& r) {
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = engine_.alloc_pd();
  if (!pd) return fail(c, "alloc_pd", pd.error());
  uint32_t h = c.new_handle();
  c.pds[h].engine = *pd;
  r.as<sroce_handle_resp>().handle = h;
  return 0;
}

int Service::op_dealloc_pd(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.pds.find(req.handle);
  if (it == c.pds.end()) return -EINVAL;
  auto rc = engine_.dealloc_pd(it->second.engine);
  if (!rc) return fail(c, "dealloc_pd", rc.error());
  c.pds.erase(it);
  return 0;
}

int Service::op_reg_mr(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_reg_mr req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = c.pds.find(req.pd);
  if (pd == c.pds.end()) return -EINVAL;
  if (req.length == 0 || req.addr + req.length < req.addr || req.addr + req.length > ProcessMemory::kVaMask)
    return -EINVAL;
  // ibv_reg_mr fails with EFAULT on memory the process does not have: probe
  // the first and last byte in the owner's address space.
  // On the kernel path the module pinned the pages already (EFAULT there)
  // and the daemon maps them from the channel.
  SharedMemory kmap;
  std::byte* kat = nullptr;
  bool kwritable = false;
  if (c.kernel) {
    int rc = kernel_mr(body.subspan(sizeof req), req.length, kmap, kat, kwritable);
    if (rc != 0) return rc;
  } else if (int rc = probe_range(c, req.addr, req.length); rc != 0) {
    return rc;
  }
  // Every MR is registered with the host address tagged by its context (memory.h): the
  // engine's lookups and ProcessMemory never cross contexts, whatever ranges others register.
  auto keys = engine_.reg_mr_host(pd->second.engine, ProcessMemory::tagged(c.tag, req.addr), req.length,
                                  req.access, req.iova);
  if (!keys) return fail(c, "reg_mr", keys.error());
  MrObj& m = c.mrs[keys->lkey];
  m.rkey = keys->rkey;
  m.pd = req.pd;
  m.addr = req.addr;
  m.length = req.length;
  m.access = req.access;
  if (c.kernel) {
    m.kmap = std::move(kmap);
    mem_.add_mapped_range(c.tag, keys->lkey, req.addr, req.length, kat, kwritable);
  } else {
    mem_.add_range(c.tag, req.addr, req.length);
  }
  auto& resp = r.as<sroce_reg_mr_resp>();
  resp.lkey = keys->lkey;
  resp.rkey = keys->rkey;
  return 0;
}

// ibv_reg_mr fails with EFAULT on memory the process does not have: the first and last byte
// are read through the context's own mem file (memory.h). A gone address space fails too, and
// the loop closes the context (reap_gone_contexts).
int Service::probe_range(Context& c, uint64_t addr, uint64_t length) {
  for (uint64_t a : {addr, addr + length - 1})
    if (mem_.probe(c.tag, a) != 0) return -EFAULT;
  return 0;
}

int Service::op_dereg_mr(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.mrs.find(req.handle);
  if (it == c.mrs.end()) return -EINVAL;
  auto rc = engine_.dereg_mr(req.handle);
  if (!rc) return fail(c, "dereg_mr", rc.error());
  unshare_mr(c, req.handle, it->second);
  mem_.remove_mr_map(c.tag, req.handle);  // a kernel-path MR's pinned pages
  mem_.remove_range(c.tag, it->second.addr, it->second.length);
  c.mrs.erase(it);
  return 0;
}

// ibv_alloc_mw / ibv_dealloc_mw (docs/engine.md, "Memory windows"): the window lives in the
// engine; BIND_MW work requests name it by the local handle (service_rings.cc). Dealloc of a
// bound window unbinds it; dereg_mr of an MR with windows bound answers EBUSY (engine).
int Service::op_alloc_mw(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_alloc_mw req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = c.pds.find(req.pd);
  if (pd == c.pds.end()) return -EINVAL;
  auto mw = engine_.alloc_mw(pd->second.engine, req.type);
  if (!mw) return fail(c, "alloc_mw", mw.error());
  const uint32_t h = c.new_handle();
  c.mws[h] = MwObj{mw->handle, req.pd};
  auto& resp = r.as<sroce_alloc_mw_resp>();
  resp.handle = h;
  resp.rkey = mw->rkey;
  return 0;
}

int Service::op_dealloc_mw(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.mws.find(req.handle);
  if (it == c.mws.end()) return -EINVAL;
  auto rc = engine_.dealloc_mw(it->second.engine);
  if (!rc) return fail(c, "dealloc_mw", rc.error());
  c.mws.erase(it);
  return 0;
}

// ibv_rereg_mr (SROCE_OP_REREG_MR): the MR changes in place and keeps its keys, so a peer
// that was given the rkey goes on using it (programs do not exchange keys again). Flags and
// errno follow the kernel's uverbs REREG_MR, which is what libibverbs users know: no flag or
// an unknown one EINVAL (libibverbs 44 refuses unknown bits itself), a PD that is not the
// caller's EINVAL, memory the process does not have EFAULT. Everything is checked
// before the engine changes the MR, and the engine checks before it applies: on any error the
// MR, its memory range and its PD are as they were.
int Service::op_rereg_mr(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_rereg_mr req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.mrs.find(req.lkey);
  if (it == c.mrs.end()) return -EINVAL;
  MrObj& m = it->second;
  constexpr uint32_t kChanges =
      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  if (req.flags == 0 || (req.flags & ~kChanges)) return -EINVAL;
  // The kernel path's MRs are pinned pages mapped from the module: a new PD or new rights
  // change in place (the module refuses rights that need writable pages it pinned
  // read-only); a new translation comes with the new pages (service_resize.cc).
  if (c.kernel && (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION))
    return kernel_rereg_translation(c, m, req, body.subspan(sizeof req), r);
  uint32_t pd_handle = m.pd;
  Handle engine_pd = kNoHandle;
  if (req.flags & IBV_REREG_MR_CHANGE_PD) {
    auto pd = c.pds.find(req.pd);
    if (pd == c.pds.end()) return -EINVAL;
    pd_handle = req.pd;
    engine_pd = pd->second.engine;
  }
  const uint32_t access = (req.flags & IBV_REREG_MR_CHANGE_ACCESS) ? req.access : m.access;
  uint64_t addr = m.addr, length = m.length;
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    if (req.length == 0 || req.addr + req.length < req.addr ||
        req.addr + req.length > ProcessMemory::kVaMask)
      return -EINVAL;
    if (int rc = probe_range(c, req.addr, req.length); rc != 0) return rc;
    addr = req.addr;
    length = req.length;
  }
  // The host address stays tagged (memory.h); the iova is the one asked for with a new
  // translation, else the address itself or 0 (ZERO_BASED) when that bit changes.
  const uint64_t iova = (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? req.iova
                        : (access & IBV_ACCESS_ZERO_BASED)          ? 0
                                                                    : m.addr;
  auto rc = engine_.rereg_mr_host(req.lkey, req.flags & kChanges, engine_pd, ProcessMemory::tagged(c.tag, addr),
                                  length, access, iova);
  if (!rc) return fail(c, "rereg_mr", rc.error());
  // A new range or new rights: the shared mapping (if any) was made for the old ones; the MR
  // goes on through the mem file.
  if (addr != m.addr || length != m.length || access != m.access) unshare_mr(c, req.lkey, m);
  if (addr != m.addr || length != m.length) {
    mem_.add_range(c.tag, addr, length);  // before the old one goes: ranges may overlap
    mem_.remove_range(c.tag, m.addr, m.length);
  }
  m.pd = pd_handle;
  m.addr = addr;
  m.length = length;
  m.access = access;
  auto& resp = r.as<sroce_reg_mr_resp>();
  resp.lkey = req.lkey;
  resp.rkey = m.rkey;
  return 0;
}

int Service::op_create_channel(Context& c, Reply& r) {
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  uint32_t h = c.new_handle();
  c.channels[h].fd = sv[0];
  r.as<sroce_handle_resp>().handle = h;
  r.add_fd(sv[1]);
  return 0;
}

int Service::op_destroy_channel(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.channels.find(req.handle);
  if (it == c.channels.end()) return -EINVAL;
  if (it->second.users) return -EBUSY;
  close(it->second.fd);
  c.channels.erase(it);
  return 0;
}

int Service::op_create_cq(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_create_cq req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  if (req.cqe == 0 || req.cqe > cfg_.engine.max_cqe) return -EINVAL;
  ChannelObj* ch = nullptr;
  if (c.kernel && req.channel != SROCE_KCHANNEL) return -EINVAL;
  if (req.channel && !c.kernel) {
    auto it = c.channels.find(req.channel);
    if (it == c.channels.end()) return -EINVAL;
    ch = &it->second;
  }
  uint32_t size = next_pow2(req.cqe);
  uint32_t esz = static_cast<uint32_t>(round_up(sizeof(sroce_cqe), 16));
  SharedMemory shm;
  int rc = c.kernel ? kernel_ring(body.subspan(sizeof req), size, esz, shm)
                    : shm.create("sroce-cq", ShmRing::bytes_for(size, esz));
  if (rc != 0) return rc;
  auto cq = engine_.create_cq(size);
  if (!cq) return fail(c, "create_cq", cq.error());
  uint32_t h = c.new_handle();
  CqObj& o = c.cqs[h];
  o.engine = *cq;
  o.user_handle = req.user_handle;
  o.channel = req.channel;
  o.shm = std::move(shm);
  o.ring.init(o.shm.base(), size, esz);
  if (ch) ++ch->users;
  cq_owner_[o.engine] = {c.id, h};
  auto& resp = r.as<sroce_create_cq_resp>();
  resp.handle = h;
  resp.cqe = size;
  resp.ring_bytes = o.shm.size();
  if (!c.kernel) r.add_fd(dup(o.shm.fd()));
  return 0;
}

int Service::op_destroy_cq(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.cqs.find(req.handle);
  if (it == c.cqs.end()) return -EINVAL;
  if (it->second.users) return -EBUSY;
  auto rc = engine_.destroy_cq(it->second.engine);
  if (!rc) return fail(c, "destroy_cq", rc.error());
  if (it->second.channel) {
    auto ch = c.channels.find(it->second.channel);
    if (ch != c.channels.end()) --ch->second.users;
  }
  cq_owner_.erase(it->second.engine);
  c.cqs.erase(it);
  return 0;
}

int Service::op_create_srq(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_create_srq req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = c.pds.find(req.pd);
  if (pd == c.pds.end()) return -EINVAL;
  if (req.max_wr == 0 || req.max_wr > cfg_.engine.max_qp_wr || req.max_sge == 0 ||
      req.max_sge > cfg_.engine.max_sge || req.srq_limit > req.max_wr)
    return -EINVAL;
  uint32_t size = next_pow2(req.max_wr);
  uint32_t esz = static_cast<uint32_t>(round_up(sizeof(sroce_recv_wqe) + req.max_sge * sizeof(sroce_sge), 16));
  SharedMemory shm;
  int rc = c.kernel ? kernel_ring(body.subspan(sizeof req), size, esz, shm)
                    : shm.create("sroce-srq", ShmRing::bytes_for(size, esz));
  if (rc != 0) return rc;
  SrqAttr attr;
  attr.max_wr = req.max_wr;
  attr.max_sge = req.max_sge;
  attr.srq_limit = req.srq_limit;
  auto srq = engine_.create_srq(pd->second.engine, attr);
  if (!srq) return fail(c, "create_srq", srq.error());
  uint32_t h = c.new_handle();
  SrqObj& o = c.srqs[h];
  o.engine = *srq;
  o.pd = req.pd;
  o.user_handle = req.user_handle;
  o.max_wr = req.max_wr;
  o.max_sge = req.max_sge;
  o.srq_limit = req.srq_limit;
  o.shm = std::move(shm);
  o.ring.init(o.shm.base(), size, esz);
  srq_owner_[o.engine] = {c.id, h};
  auto& resp = r.as<sroce_create_srq_resp>();
  resp.handle = h;
  resp.max_wr = req.max_wr;
  resp.max_sge = req.max_sge;
  resp.ring_bytes = o.shm.size();
  if (!c.kernel) r.add_fd(dup(o.shm.fd()));
  return 0;
}

int Service::op_modify_srq(Context& c, std::span<const std::byte> body) {
  sroce_modify_srq req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.srqs.find(req.handle);
  if (it == c.srqs.end()) return -EINVAL;
  SrqObj& o = it->second;
  if (req.attr_mask & ~uint32_t{IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT}) return -EINVAL;
  // Resizing would move the ring under the application; the ring already
  // has power-of-two room, so growing within it is allowed.
  if ((req.attr_mask & IBV_SRQ_MAX_WR) && (req.max_wr == 0 || req.max_wr > o.ring.size())) return -EINVAL;
  if (req.attr_mask & IBV_SRQ_LIMIT) {
    uint32_t max_wr = (req.attr_mask & IBV_SRQ_MAX_WR) ? req.max_wr : o.max_wr;
    if (req.srq_limit > max_wr) return -EINVAL;
    auto rc = engine_.modify_srq(o.engine, req.srq_limit);
    if (!rc) return fail(c, "modify_srq", rc.error());
    o.srq_limit = req.srq_limit;
  }
  if (req.attr_mask & IBV_SRQ_MAX_WR) o.max_wr = req.max_wr;
  return 0;
}

int Service::op_query_srq(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.srqs.find(req.handle);
  if (it == c.srqs.end()) return -EINVAL;
  auto& a = r.as<sroce_srq_attr>();
  a.max_wr = it->second.max_wr;
  a.max_sge = it->second.max_sge;
  a.srq_limit = it->second.srq_limit;
  return 0;
}

int Service::op_destroy_srq(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.srqs.find(req.handle);
  if (it == c.srqs.end()) return -EINVAL;
  if (it->second.users) return -EBUSY;
  auto rc = engine_.destroy_srq(it->second.engine);
  if (!rc) return fail(c, "destroy_srq", rc.error());
  srq_owner_.erase(it->second.engine);
  c.srqs.erase(it);
  return 0;
}

int Service::op_create_ah(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_create_ah req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = c.pds.find(req.pd);
  if (pd == c.pds.end()) return -EINVAL;
  auto ah = engine_.create_ah(pd->second.engine, to_engine(req.attr));
  if (!ah) return fail(c, "create_ah", ah.error());
  uint32_t h = c.new_handle();
  c.ahs[h] = AhObj{*ah, req.pd};
  r.as<sroce_handle_resp>().handle = h;
  return 0;
}

int Service::op_destroy_ah(Context& c, std::span<const std::byte> body) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.ahs.find(req.handle);
  if (it == c.ahs.end()) return -EINVAL;
  auto rc = engine_.destroy_ah(it->second.engine);
  if (!rc) return fail(c, "destroy_ah", rc.error());
  c.ahs.erase(it);
  return 0;
}

int Service::op_create_qp(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_create_qp req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.object_count() >= cfg_.control.max_objects_per_context) return -ENOMEM;
  auto pd = c.pds.find(req.pd);
  auto scq = c.cqs.find(req.send_cq);
  auto rcq = c.cqs.find(req.recv_cq);
  if (pd == c.pds.end() || scq == c.cqs.end() || rcq == c.cqs.end()) return -EINVAL;
  SrqObj* srq = nullptr;
  if (req.srq) {
    auto it = c.srqs.find(req.srq);
    if (it == c.srqs.end()) return -EINVAL;
    srq = &it->second;
  }
  if (req.qp_type != IBV_QPT_RC && req.qp_type != IBV_QPT_UC && req.qp_type != IBV_QPT_UD) return -EOPNOTSUPP;
  const auto& e = cfg_.engine;
  sroce_qp_cap cap = req.cap;
  if (cap.max_send_wr > e.max_qp_wr || cap.max_send_sge > e.max_sge || cap.max_inline_data > e.max_inline_data ||
      (!srq && (cap.max_recv_wr > e.max_qp_wr || cap.max_recv_sge > e.max_sge)))
    return -EINVAL;
  if (srq) cap.max_recv_wr = cap.max_recv_sge = 0;
  cap.max_send_wr = std::max(cap.max_send_wr, 1u);
  cap.max_send_sge = std::max(cap.max_send_sge, 1u);
  if (!srq) {
    cap.max_recv_wr = std::max(cap.max_recv_wr, 1u);
    cap.max_recv_sge = std::max(cap.max_recv_sge, 1u);
  }

  uint32_t sq_size = next_pow2(cap.max_send_wr);
  uint32_t sq_esz = static_cast<uint32_t>(round_up(
      sizeof(sroce_send_wqe) + std::max<size_t>(cap.max_send_sge * sizeof(sroce_sge), cap.max_inline_data), 16));
  uint32_t rq_size = srq ? 0 : next_pow2(cap.max_recv_wr);
  uint32_t rq_esz =
      srq ? 0 : static_cast<uint32_t>(round_up(sizeof(sroce_recv_wqe) + cap.max_recv_sge * sizeof(sroce_sge), 16));
  size_t sq_bytes = round_up(ShmRing::bytes_for(sq_size, sq_esz), 64);
  size_t total = sq_bytes + (srq ? 0 : ShmRing::bytes_for(rq_size, rq_esz));
  SharedMemory shm;
  int rc = c.kernel ? kernel_qp_rings(body.subspan(sizeof req), sq_size, sq_esz, rq_size, rq_esz, sq_bytes,
                                     srq != nullptr, shm)
                    : shm.create("sroce-qp", total);
  if (rc != 0) return rc;

  QpInitAttr ia;
  ia.qp_type = static_cast<QpType>(req.qp_type);
  ia.send_cq = scq->second.engine;
  ia.recv_cq = rcq->second.engine;
  ia.srq = srq ? srq->engine : kNoHandle;
  ia.cap = QpCap{cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data};
  ia.sq_sig_all = req.sq_sig_all != 0;
  auto qpn = engine_.create_qp(pd->second.engine, ia);
  if (!qpn) return fail(c, "create_qp", qpn.error());

  QpObj& q = c.qps[*qpn];
  q.qpn = *qpn;
  q.qp_type = req.qp_type;
  q.pd = req.pd;
  q.send_cq = req.send_cq;
  q.recv_cq = req.recv_cq;
  q.srq = req.srq;
  q.user_handle = req.user_handle;
  q.cap = ia.cap;
  q.shm = std::move(shm);
  q.sq.init(q.shm.base(), sq_size, sq_esz);
  if (!srq) q.rq.init(q.shm.base() + sq_bytes, rq_size, rq_esz);
  ++scq->second.users;
  ++rcq->second.users;
  if (srq) ++srq->users;
  qp_owner_[*qpn] = c.id;

  auto& resp = r.as<sroce_create_qp_resp>();
  resp.qpn = *qpn;
  resp.cap = cap;
  resp.ring_bytes = q.shm.size();
  resp.sq_offset = 0;
  resp.rq_offset = srq ? ~0ull : sq_bytes;
  if (!c.kernel) r.add_fd(dup(q.shm.fd()));
  return 0;
}

int Service::op_modify_qp(Context& c, std::span<const std::byte> body, Time now) {
  sroce_modify_qp req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.qps.find(req.qpn) == c.qps.end()) return -EINVAL;
  const sroce_qp_attr& a = req.attr;
  if (a.qp_state > IBV_QPS_ERR || a.cur_qp_state > IBV_QPS_ERR) return -EINVAL;
  if ((req.attr_mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096)) return -EINVAL;
  QpAttr q;
  q.qp_state = static_cast<QpState>(a.qp_state);
  q.cur_qp_state = static_cast<QpState>(a.cur_qp_state);
  q.path_mtu = a.path_mtu ? static_cast<Mtu>(a.path_mtu) : Mtu::k1024;
  q.qkey = a.qkey;
  q.rq_psn = a.rq_psn;
  q.sq_psn = a.sq_psn;
  q.dest_qp_num = a.dest_qp_num;
  q.qp_access_flags = a.qp_access_flags;
  q.cap = QpCap{a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
                a.cap.max_inline_data};
  q.ah_attr = to_engine(a.ah_attr);
  q.pkey_index = a.pkey_index;
  q.en_sqd_async_notify = a.en_sqd_async_notify != 0;
  q.sq_draining = a.sq_draining != 0;
  q.max_rd_atomic = a.max_rd_atomic;
  q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  q.min_rnr_timer = a.min_rnr_timer;
  q.port_num = a.port_num;
  q.timeout = a.timeout;
  q.retry_cnt = a.retry_cnt;
  q.rnr_retry = a.rnr_retry;
  auto rc = engine_.modify_qp(req.qpn, q, req.attr_mask, now);
  if (!rc) return fail(c, "modify_qp", rc.error());
  return 0;
}

int Service::op_query_qp(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  if (c.qps.find(req.handle) == c.qps.end()) return -EINVAL;
  auto q = engine_.query_qp(req.handle);
  if (!q) return fail(c, "query_qp", q.error());
  auto& a = r.as<sroce_qp_attr>();
  a.qp_state = static_cast<uint32_t>(q->qp_state);
  a.cur_qp_state = static_cast<uint32_t>(q->cur_qp_state);
  a.path_mtu = static_cast<uint32_t>(q->path_mtu);
  a.qkey = q->qkey;
  a.rq_psn = q->rq_psn;
  a.sq_psn = q->sq_psn;
  a.dest_qp_num = q->dest_qp_num;
  a.qp_access_flags = q->qp_access_flags;
  a.cap = sroce_qp_cap{q->cap.max_send_wr, q->cap.max_recv_wr, q->cap.max_send_sge, q->cap.max_recv_sge,
                       q->cap.max_inline_data, 0};
  from_engine(q->ah_attr, a.ah_attr);
  a.pkey_index = q->pkey_index;
  a.en_sqd_async_notify = q->en_sqd_async_notify;
  a.sq_draining = q->sq_draining;
  a.max_rd_atomic = q->max_rd_atomic;
  a.max_dest_rd_atomic = q->max_dest_rd_atomic;
  a.min_rnr_timer = q->min_rnr_timer;
  a.port_num = q->port_num;
  a.timeout = q->timeout;
  a.retry_cnt = q->retry_cnt;
  a.rnr_retry = q->rnr_retry;
  return 0;
}

int Service::op_destroy_qp(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_handle_req req;
  if (!body_as(body, req)) return -EINVAL;
  auto it = c.qps.find(req.handle);
  if (it == c.qps.end()) return -EINVAL;
  auto rc = engine_.destroy_qp(req.handle);
  if (!rc) return fail(c, "destroy_qp", rc.error());
  QpObj& q = it->second;
  r.as<sroce_destroy_qp_resp>().events_reported = q.events_reported;
  if (auto cq = c.cqs.find(q.send_cq); cq != c.cqs.end()) --cq->second.users;
  if (auto cq = c.cqs.find(q.recv_cq); cq != c.cqs.end()) --cq->second.users;
  if (auto s = c.srqs.find(q.srq); q.srq && s != c.srqs.end()) --s->second.users;
  qp_owner_.erase(q.qpn);
  c.qps.erase(it);
  return 0;
}

void Service::destroy_objects(Context& c) {
  // Order matters: QPs first (they reference CQs, SRQs, PDs and memory),
  // then what they used, memory last so no engine access outlives it.
  for (auto& [qpn, q] : c.qps) {
    QpAttr err;
    err.qp_state = QpState::kErr;
    (void)engine_.modify_qp(qpn, err, kQpState, now_);
    (void)engine_.destroy_qp(qpn);
    qp_owner_.erase(qpn);
  }
  c.qps.clear();
  for (auto& [h, s] : c.srqs) {
    (void)engine_.destroy_srq(s.engine);
    srq_owner_.erase(s.engine);
  }
  c.srqs.clear();
  for (auto& [h, a] : c.ahs) (void)engine_.destroy_ah(a.engine);
  c.ahs.clear();
  for (auto& [h, w] : c.mws) (void)engine_.dealloc_mw(w.engine);  // before MRs: unbinds them
  c.mws.clear();
  for (auto& [lkey, m] : c.mrs) {
    (void)engine_.dereg_mr(lkey);
    mem_.remove_mr_map(c.tag, lkey);  // before c.mrs unmaps its pages
    mem_.remove_range(c.tag, m.addr, m.length);
  }
  c.mrs.clear();
  for (auto& [h, cq] : c.cqs) {
    (void)engine_.destroy_cq(cq.engine);
    cq_owner_.erase(cq.engine);
  }
  c.cqs.clear();
  for (auto& [h, pd] : c.pds) (void)engine_.dealloc_pd(pd.engine);
  c.pds.clear();
  for (auto& [h, ch] : c.channels) close(ch.fd);
  c.channels.clear();
}

}  // namespace sroce::daemon
