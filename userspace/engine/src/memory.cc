// Memory protection (IBA 10.6: L_Key / R_Key checks against the MR's PD,
// bounds and access rights) and the copies between packets and application
// memory. Application memory is only ever reached through MemoryAccess.
#include <cstring>

#include "impl.h"

namespace sroce {

bool MemoryAccess::read_mr_crc(uint32_t lkey, uint64_t addr, std::span<std::byte> out, uint32_t& crc) {
  if (!read_mr(lkey, addr, out)) return false;
  crc = sroce_crc32_update(crc, reinterpret_cast<const uint8_t*>(out.data()), out.size());
  return true;
}

using namespace eng;

// IBA 10.6 (memory protection): every SGE of a local WR must name a valid MR of the
// QP's PD that contains it and grants the access the operation needs.
// The keys are checked once, when the WQE starts; packets then use the
// resolved host addresses, each after mr_live() of its MR: deregistering or
// reregistering an MR that a started WQE uses fails the WQE (IBV_WC_LOC_PROT_ERR)
// instead of letting it touch the memory after dereg_mr returned.
MemStatus Engine::Impl::check_local_sgl(Qp& qp, const Sge* sges, uint32_t n, uint32_t need,
                                        uint64_t* hosts, uint64_t* refs) {
  for (uint32_t i = 0; i < n; ++i) {
    const Sge& s = sges[i];
    hosts[i] = 0;
    refs[i] = 0;
    if (s.length == 0) continue;
    const Mr* mr = mr_by_lkey(s.lkey);
    if (!mr || mr->pd != qp.pd || mr->invalidated || !covers(*mr, s.addr, s.length) ||
        (mr->access & need) != need)
      return MemStatus::kProt;
    hosts[i] = mr->addr + (s.addr - mr->iova);
    refs[i] = mr_ref(*mr);
  }
  return MemStatus::kOk;
}

bool Engine::Impl::check_rkey(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t need,
                              uint64_t* host, uint64_t* ref) {
  const Mr* mr = mr_by_rkey(rkey);
  if (!mr || mr->pd != qp.pd || mr->invalidated || (mr->access & need) != need ||
      !covers(*mr, va, len))
    return false;
  // A memory window (mw.cc): a type 2 window answers only the QP it was bound through
  // (IBA 10.6.7.2.2, type 2B), and the MR under any window must still be valid.
  if (mr->kind != 0 &&
      ((mr->kind == kMwType2 && mr->mw_qpn != qp.qpn) || mrs_[mr->mw_mr].invalidated))
    return false;
  *host = mr->addr + (va - mr->iova);
  *ref = mr_ref(*mr);
  return true;
}

void Engine::Impl::seek_cursor(const Sge* sges, uint32_t n, uint32_t off, uint32_t* idx,
                               uint32_t* in) {
  uint32_t i = 0;
  while (i < n && off >= sges[i].length) {
    off -= sges[i].length;
    ++i;
  }
  *idx = i;
  *in = off;
}

// Requester: `len` bytes of sq[idx] at the requester cursor into a packet;
// with `crc`, the CRC-32 register over them too (read_mr_crc, one pass).
MemStatus Engine::Impl::gather(Qp& qp, uint32_t idx, std::byte* dst, uint32_t len, uint32_t* crc) {
  SendWqe& w = qp.wqe(idx);
  if (w.flags & kWqeInline) {
    const std::byte* src = qp.wqe_inline(idx) + qp.req_off;
    if (crc)
      *crc = sroce_crc32_copy(*crc, reinterpret_cast<uint8_t*>(dst), reinterpret_cast<const uint8_t*>(src), len);
    else
      std::memcpy(dst, src, len);
    return MemStatus::kOk;
  }
  const Sge* sges = qp.wqe_sges(idx);
  const uint64_t* hosts = qp.wqe_hosts(idx);
  const uint64_t* refs = qp.wqe_refs(idx);
  uint32_t i = qp.req_sge, in = qp.req_sge_off;
  while (len > 0) {
    while (i < w.num_sge && in >= sges[i].length) {
      ++i;
      in = 0;
    }
    if (i >= w.num_sge) return MemStatus::kLen;
    const uint32_t chunk = std::min(len, sges[i].length - in);
    if (!mr_live(refs[i])) return MemStatus::kProt;  // deregistered since the WQE started
    if (!(crc ? mem_.read_mr_crc(mem_lkey(refs[i]), hosts[i] + in, {dst, chunk}, *crc)
              : mem_.read_mr(mem_lkey(refs[i]), hosts[i] + in, {dst, chunk})))
      return MemStatus::kAccess;
    dst += chunk;
    len -= chunk;
    in += chunk;
  }
  qp.req_sge = i;
  qp.req_sge_off = in;
  return MemStatus::kOk;
}

// Requester: READ response data or an atomic's original value into sq[idx]'s
// SGEs at byte offset `off` (checked for LOCAL_WRITE when the WQE started).
MemStatus Engine::Impl::scatter_wqe(Qp& qp, uint32_t idx, uint32_t off, const std::byte* src,
                                    uint32_t len) {
  const SendWqe& w = qp.wqe(idx);
  const Sge* sges = qp.wqe_sges(idx);
  const uint64_t* hosts = qp.wqe_hosts(idx);
  const uint64_t* refs = qp.wqe_refs(idx);
  uint32_t i, in;
  seek_cursor(sges, w.num_sge, off, &i, &in);
  while (len > 0) {
    if (i >= w.num_sge) return MemStatus::kLen;
    const uint32_t chunk = std::min(len, sges[i].length - in);
    if (chunk > 0) {
      if (!mr_live(refs[i])) return MemStatus::kProt;  // deregistered since the WQE started
      if (!mem_.write_mr(mem_lkey(refs[i]), hosts[i] + in, {src, chunk})) return MemStatus::kAccess;
      src += chunk;
      len -= chunk;
    }
    ++i;
    in = 0;
  }
  return MemStatus::kOk;
}

// Responder: payload of a SEND into the receive WQE being filled. Receive
// buffers were not checked at post time (IBA 10.8 allows deferring the
// L_Key check to when the WQE is used), so each SGE is checked here.
MemStatus Engine::Impl::scatter_recv(Qp& qp, const std::byte* src, uint32_t len) {
  if (len > qp.rwqe_len - qp.recv_off) return MemStatus::kLen;
  const Sge* sges = qp.rwqe_sge.data();
  uint32_t i = qp.recv_sge, in = qp.recv_sge_off;
  qp.recv_off += len;
  while (len > 0) {
    while (i < qp.rwqe_nsge && in >= sges[i].length) {
      ++i;
      in = 0;
    }
    if (i >= qp.rwqe_nsge) return MemStatus::kLen;
    const Sge& s = sges[i];
    const uint32_t chunk = std::min(len, s.length - in);
    const Mr* mr = mr_by_lkey(s.lkey);
    if (!mr || mr->pd != qp.pd || mr->invalidated || !(mr->access & kAccessLocalWrite) ||
        !covers(*mr, s.addr, s.length))
      return MemStatus::kProt;
    if (!mem_.write_mr(mr->lkey, mr->addr + (s.addr - mr->iova) + in, {src, chunk}))
      return MemStatus::kAccess;
    src += chunk;
    len -= chunk;
    in += chunk;
  }
  qp.recv_sge = i;
  qp.recv_sge_off = in;
  return MemStatus::kOk;
}

}  // namespace sroce
