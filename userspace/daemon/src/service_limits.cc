// Per-uid limits, the connection policy at accept, the HELLO timeout and the
// privileged Q_Key check (uid_limits.h; docs/security.md, "Limits" and "Keys").
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

namespace {
// After accept(2) fails for want of descriptors or memory, the listening
// socket stays readable: it leaves the loop's interest for this long instead
// of waking the loop again at once (a busy loop at 100% CPU otherwise).
constexpr Duration kAcceptPause = Duration::millis(100);
constexpr int kCapNetRaw = 13;  // linux/capability.h CAP_NET_RAW

template <typename T>
bool body_as(std::span<const std::byte> body, T& out) {
  if (body.size() < sizeof(T)) return false;
  memcpy(&out, body.data(), sizeof(T));
  return true;
}
}  // namespace

bool proc_has_net_raw(pid_t pid, uid_t uid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  FILE* f = fopen(path, "re");
  if (!f) return false;
  char line[256];
  bool uid_ok = false, cap = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long long eff = 0;
    unsigned r = 0, e = 0;
    // "Uid: real effective saved fs": the process must still be the one
    // SO_PEERCRED named (same real and effective uid), not a pid reused by
    // someone else.
    if (sscanf(line, "Uid: %u %u", &r, &e) == 2) uid_ok = r == uid && e == uid;
    if (sscanf(line, "CapEff: %llx", &eff) == 1) cap = (eff >> kCapNetRaw) & 1;
  }
  fclose(f);
  return uid_ok && cap;
}

bool Service::limited(uid_t uid) const { return uid != 0 || cfg_.limits.root; }

UidUsage Service::usage_of(uid_t uid) const {
  UidUsage u;
  for (const auto& [id, c] : contexts_) {
    if (c->kernel || c->uid != uid) continue;
    ++u.contexts;
    u.qps += static_cast<uint32_t>(c->qps.size());
    u.mrs += static_cast<uint32_t>(c->mrs.size() + c->mws.size());
    for (const auto& [lkey, m] : c->mrs) u.mr_bytes += m.length;
    u.ring_fds += static_cast<uint32_t>(c->cqs.size() + c->qps.size() + c->srqs.size() + c->channels.size());
  }
  return u;
}

int Service::admit_connection(const ucred& cred) {
  if (!uid_allowed(cred.uid, cred.gid)) {
    spdlog::warn("pid {} uid {} refused by the uid policy (control.allow_*)", cred.pid, cred.uid);
    return -EACCES;
  }
  if (free_tags_.empty()) {
    spdlog::warn("pid {} uid {} refused: control.max_contexts ({}) reached", cred.pid, cred.uid,
                 cfg_.control.max_contexts);
    return -EMFILE;
  }
  if (limited(cred.uid) && usage_of(cred.uid).contexts >= cfg_.limits.contexts_per_uid) {
    ++limit_stats_.contexts;
    spdlog::warn("pid {} uid {} refused: limits.contexts_per_uid ({}) reached", cred.pid, cred.uid,
                 cfg_.limits.contexts_per_uid);
    return -EMFILE;
  }
  return 0;
}

void Service::refuse_connection(int fd, int status) {
  // A notice (sequence 0, never a request's) the client reads as the answer
  // to its first request, then the connection is closed at once: a refused
  // peer holds nothing of the daemon, not even a context slot.
  sroce_msg_hdr h{};
  h.magic = SROCE_ABI_MAGIC;
  h.op = SROCE_OP_HELLO;
  h.seq = 0;
  h.status = status;
  (void)send(fd, &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
  // What the peer sent already is read first: closing with it unread would
  // reset the connection, and the peer would see that before the notice.
  char sink[64];
  for (int i = 0; i < 8 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  close(fd);
  ++stats_.ctl_refused;
}

void Service::accept_failed(int err, Time now) {
  ++limit_stats_.accept_errors;
  if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) return;
  if (listen_paused_) return;
  listen_paused_ = true;
  listen_resume_ = now + kAcceptPause;
  ++limit_stats_.accept_pauses;
  if (env_.listen_interest) env_.listen_interest(false);
  spdlog::warn("accept: {}: new connections wait {} ms", strerror(err), kAcceptPause.ps / 1'000'000'000);
}

Time Service::next_deadline() const {
  Time t = hello_deadline_;
  if (listen_paused_ && listen_resume_ < t) t = listen_resume_;
  return t;
}

void Service::on_timer(Time now) {
  if (listen_paused_ && now >= listen_resume_) {
    listen_paused_ = false;
    if (env_.listen_interest) env_.listen_interest(true);
  }
  if (now < hello_deadline_) return;
  const Duration timeout = Duration::millis(cfg_.limits.hello_timeout_ms);
  hello_deadline_ = Time::never();
  std::vector<uint32_t> expired;
  for (const auto& [id, c] : contexts_) {
    if (c->kernel || c->hello) continue;
    const Time due = c->accepted + timeout;
    if (due <= now) {
      expired.push_back(id);
    } else if (due < hello_deadline_) {
      hello_deadline_ = due;
    }
  }
  for (uint32_t id : expired) {
    ++limit_stats_.hello_timeouts;
    close_context(id, "sent no HELLO in time (limits.hello_timeout_ms)");
  }
}

void Service::note_accepted(Context& c, Time now) {
  c.accepted = now;
  const Time due = now + Duration::millis(cfg_.limits.hello_timeout_ms);
  if (due < hello_deadline_) hello_deadline_ = due;
}

int Service::admit_request(Context& c, uint16_t op, std::span<const std::byte> body) {
  if (c.kernel) return 0;  // the module's contexts: the kernel's own rules apply
  if (op == SROCE_OP_MODIFY_QP) {
    // Linux uverbs (modify_qp): setting a Q_Key with the high bit needs
    // CAP_NET_RAW, EPERM otherwise; such a Q_Key lets a UD QP receive what
    // is meant for privileged QPs.
    sroce_modify_qp req;
    if (body_as(body, req) && (req.attr_mask & IBV_QP_QKEY) && (req.attr.qkey & kPrivilegedQkeyBit) &&
        !c.net_raw) {
      ++limit_stats_.qkey_eperm;
      return -EPERM;
    }
    return 0;
  }
  if (!limited(c.uid)) return 0;
  const auto& l = cfg_.limits;
  auto refuse = [&](uint64_t& counter, int err, const char* key, uint64_t limit) {
    ++counter;
    spdlog::debug("context {}: uid {}: {} ({}) reached", c.id, c.uid, key, limit);
    return err;
  };
  const bool ring = op == SROCE_OP_CREATE_CQ || op == SROCE_OP_CREATE_QP || op == SROCE_OP_CREATE_SRQ ||
                    op == SROCE_OP_CREATE_COMP_CHANNEL;
  const bool mr = op == SROCE_OP_REG_MR || op == SROCE_OP_ALLOC_MW;
  if (!ring && !mr && op != SROCE_OP_REREG_MR) return 0;
  const UidUsage u = usage_of(c.uid);
  if (ring && u.ring_fds >= l.ring_fds_per_uid)
    return refuse(limit_stats_.ring_fds, -EMFILE, "limits.ring_fds_per_uid", l.ring_fds_per_uid);
  if (op == SROCE_OP_CREATE_QP && u.qps >= l.qps_per_uid)
    return refuse(limit_stats_.qps, -ENOMEM, "limits.qps_per_uid", l.qps_per_uid);
  if (mr && u.mrs >= l.mrs_per_uid) return refuse(limit_stats_.mrs, -ENOMEM, "limits.mrs_per_uid", l.mrs_per_uid);
  uint64_t more = 0;
  if (sroce_reg_mr req; op == SROCE_OP_REG_MR && body_as(body, req)) more = req.length;
  if (sroce_rereg_mr req; op == SROCE_OP_REREG_MR && body_as(body, req) &&
                          (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
    auto it = c.mrs.find(req.lkey);
    if (it != c.mrs.end() && req.length > it->second.length) more = req.length - it->second.length;
  }
  if (more > l.mr_bytes_per_uid || u.mr_bytes > l.mr_bytes_per_uid - more)
    return refuse(limit_stats_.mr_bytes, -ENOMEM, "limits.mr_bytes_per_uid", l.mr_bytes_per_uid);
  return 0;
}

}  // namespace sroce::daemon
