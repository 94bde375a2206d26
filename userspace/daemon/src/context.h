// One connected process (a libibverbs context) and the objects it created.
//
// Handles the process sees (PD, CQ, SRQ, AH, comp channel) are small numbers
// allocated per context and mapped to engine handles here; MRs are named by
// their lkey and QPs by their QPN, and both are looked up in this context's
// own tables, so another context's keys and QPNs are simply not found.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "shm_ring.h"
#include "sroce/engine/engine.h"

namespace sroce::daemon {

struct PdObj {
  Handle engine = kNoHandle;
};

struct MrObj {
  uint32_t rkey = 0;
  uint32_t pd = 0;  // local handle
  uint64_t addr = 0, length = 0;
  uint32_t access = 0;
  SharedMemory kmap;  // kernel path: the pinned pages, mapped from the channel
  SharedMemory share;  // socket path: the memfd of SROCE_OP_SHARE_MR, mapped (its pages only)
};

struct ChannelObj {
  int fd = -1;  // the daemon's end of the socket pair
  uint32_t users = 0;  // CQs attached
};

struct CqObj {
  Handle engine = kNoHandle;
  uint64_t user_handle = 0;
  uint32_t channel = 0;  // local handle, 0 = none
  uint32_t users = 0;    // QPs using it
  bool engine_armed = false;  // solicited-only arm forwarded to the engine
  SharedMemory shm;
  ShmRing ring;
};

struct SrqObj {
  Handle engine = kNoHandle;
  uint32_t pd = 0;
  uint64_t user_handle = 0;
  uint32_t max_wr = 0, max_sge = 0, srq_limit = 0;
  uint32_t users = 0;
  uint32_t cons = 0;  // daemon's consumer index
  SharedMemory shm;
  ShmRing ring;
};

struct AhObj {
  Handle engine = kNoHandle;
  uint32_t pd = 0;
};

struct QpObj {
  Qpn qpn = 0;
  uint8_t qp_type = 0;
  uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = 0;  // local handles
  uint64_t user_handle = 0;
  QpCap cap;
  uint32_t events_reported = 0;
  uint32_t sq_cons = 0, rq_cons = 0;  // daemon's consumer indices
  uint64_t wqes_posted = 0, recvs_posted = 0;
  SharedMemory shm;
  ShmRing sq, rq;
};

struct MwObj {  // a memory window (ibv_alloc_mw)
  Handle engine = kNoHandle;
  uint32_t pd = 0;  // local handle
};

struct ObjectCounts {
  size_t pds = 0, mrs = 0, cqs = 0, qps = 0, srqs = 0, ahs = 0, channels = 0;
  size_t total() const { return pds + mrs + cqs + qps + srqs + ahs + channels; }
};

struct Context {
  uint32_t id = 0;
  uint16_t tag = 0;  // ProcessMemory tag
  // A context of rdma_sroce.ko (docs/kmod.md): requests arrive on the
  // kernel channel naming `kctx`, replies and events go back there; no
  // socket, no fds, rings and MRs are the module's memory mapped here.
  bool kernel = false;
  uint32_t kctx = 0;
  int sock = -1;
  int async_fd = -1;     // daemon's end of the async event socket pair
  int doorbell_fd = -1;  // eventfd the application rings
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool hello = false;
  int refused = 0;  // -errno to answer the first request with, then close
  Time accepted{};       // when accept(2) returned it (limits.hello_timeout_ms)
  bool net_raw = false;  // CAP_NET_RAW at accept (privileged Q_Keys; uid_limits.h)
  uint32_t garbage = 0;
  uint64_t requests = 0;

  uint32_t next_handle = 1;
  std::map<uint32_t, PdObj> pds;
  std::map<uint32_t, MrObj> mrs;  // by lkey
  std::map<uint32_t, CqObj> cqs;
  std::map<uint32_t, SrqObj> srqs;
  std::map<uint32_t, AhObj> ahs;
  std::map<uint32_t, ChannelObj> channels;
  std::map<Qpn, QpObj> qps;
  std::map<uint32_t, MwObj> mws;

  size_t object_count() const {
    return pds.size() + mrs.size() + cqs.size() + srqs.size() + ahs.size() + channels.size() + qps.size() +
           mws.size();
  }
  uint32_t new_handle() { return next_handle++; }
};

}  // namespace sroce::daemon
