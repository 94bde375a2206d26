// ibv_resize_cq on both paths, and the kernel path's rereg with a new translation: the two
// control verbs that give an object new memory while it is in use.
#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

// SROCE_OP_RESIZE_CQ (IBA 11.2.6.3, "Resize Completion Queue"). The CQ gets a new ring; the
// completions the application has not polled move to it in order, with `armed` (a pending
// ibv_req_notify_cq stays pending). The provider holds the CQ's poll lock for the whole call,
// so `cons` cannot move while the entries are copied, and the daemon is the only producer.
// Check, then apply: the new ring exists and the engine accepted the size before anything is
// switched, so a failed resize leaves the CQ as it was.
int Service::op_resize_cq(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_resize_cq req;
  if (body.size() < sizeof req) return -EINVAL;
  memcpy(&req, body.data(), sizeof req);
  auto it = c.cqs.find(req.handle);
  if (it == c.cqs.end()) return -EINVAL;
  CqObj& cq = it->second;
  if (req.cqe == 0 || req.cqe > cfg_.engine.max_cqe) return -EINVAL;
  // Completions the engine made and the ring had room for go to the ring first: what is
  // counted is everything the application has yet to poll.
  drain_cq(c, cq);
  const uint32_t cons = cq.ring.cons_acquire();
  const uint32_t prod = cq.ring.prod_acquire();
  const uint32_t held = prod - cons;
  if (held > cq.ring.size()) return -EIO;  // a corrupt consumer index
  if (req.cqe < held) return -EINVAL;      // as rxe: not below what the CQ holds
  const uint32_t size = next_pow2(req.cqe);
  const uint32_t esz = cq.ring.entry_size();
  SharedMemory shm;
  int rc = c.kernel ? kernel_ring(body.subspan(sizeof req), size, esz, shm)
                    : shm.create("sroce-cq", ShmRing::bytes_for(size, esz));
  if (rc != 0) return rc;
  auto er = engine_.resize_cq(cq.engine, size);
  if (!er) return fail(c, "resize_cq", er.error());
  ShmRing ring;
  ring.init(shm.base(), size, esz);
  for (uint32_t i = 0; i < held; ++i) memcpy(ring.slot(i), cq.ring.slot(cons + i), esz);
  ring.set_prod(held);
  uint32_t armed = cq.ring.armed();
  if (armed != 0 && cq.ring.disarm(armed)) ring.rearm(armed);
  cq.shm = std::move(shm);  // the old mapping goes (the application keeps its own until it unmaps)
  cq.ring = ring;
  auto& resp = r.as<sroce_create_cq_resp>();
  resp.handle = req.handle;
  resp.cqe = size;
  resp.ring_bytes = cq.shm.size();
  if (!c.kernel) r.add_fd(dup(cq.shm.fd()));
  return 0;
}

// REREG_MR with IBV_REREG_MR_CHANGE_TRANSLATION on the kernel path: the module pinned the new
// range and offers its pages as a new region (sroce_kmr_ext after the request). The engine
// moves the MR's host address to the new tagged range and its iova to the one the program
// gave (Engine::rereg_mr_host: the tag must follow, docs/kmod.md), the new mapping replaces
// the old one in ProcessMemory, and the old pages are unmapped here before the reply: the
// module unpins them once it has the answer.
int Service::kernel_rereg_translation(Context& c, MrObj& m, const sroce_rereg_mr& req,
                                      std::span<const std::byte> ext, Reply& r) {
  if (req.length == 0 || req.addr + req.length < req.addr ||
      req.addr + req.length > ProcessMemory::kVaMask)
    return -EINVAL;
  uint32_t pd_handle = m.pd;
  Handle engine_pd = kNoHandle;
  if (req.flags & IBV_REREG_MR_CHANGE_PD) {
    auto pd = c.pds.find(req.pd);
    if (pd == c.pds.end()) return -EINVAL;
    pd_handle = req.pd;
    engine_pd = pd->second.engine;
  }
  const uint32_t access = (req.flags & IBV_REREG_MR_CHANGE_ACCESS) ? req.access : m.access;
  SharedMemory kmap;
  std::byte* at = nullptr;
  bool writable = false;
  int rc = kernel_mr(ext, req.length, kmap, at, writable);
  if (rc != 0) return rc;
  auto er = engine_.rereg_mr_host(req.lkey, req.flags, engine_pd,
                                  ProcessMemory::tagged(c.tag, req.addr), req.length, access,
                                  req.iova);
  if (!er) return fail(c, "rereg_mr", er.error());
  // Old and new range may overlap: the new mapping first, then the old one goes.
  mem_.add_mapped_range(c.tag, req.lkey, req.addr, req.length, at,
                        writable);  // replaces the old mapping
  mem_.remove_range(c.tag, m.addr, m.length);
  m.kmap = std::move(kmap);
  m.pd = pd_handle;
  m.addr = req.addr;
  m.length = req.length;
  m.access = access;
  auto& resp = r.as<sroce_reg_mr_resp>();
  resp.lkey = req.lkey;
  resp.rkey = m.rkey;
  return 0;
}

}  // namespace sroce::daemon
