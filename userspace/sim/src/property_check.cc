// Property harness, part 2: the oracle (every completion against the
// expectations, in order), the run with its hang bounds, and the final
// memory, audit and ICRC accounting checks.
#include <algorithm>
#include <cstring>
#include <string>

#include "property_case.h"

namespace sroce::sim {
namespace prop {

void Case::on_wc(int side, const Wc& wc) {
  ++res_.completions;
  if (cfg_.sabotage == PropertyConfig::Sabotage::kDropCompletion && res_.completions == 1) return;
  if (cfg_.sabotage == PropertyConfig::Sabotage::kDuplicateCompletion && res_.completions == 1) {
    check_wc(side, wc);
  }
  check_wc(side, wc);
}

void Case::check_wc(int side, const Wc& wc) {
  End* end = nullptr;
  for (End& x : ends_)
    if (x.side == side && x.q.qpn == wc.qp_num) end = &x;
  if (end == nullptr) return fail("completion for unknown QP " + std::to_string(wc.qp_num));
  const bool recv = (wc.wr_id & kRecvFlag) != 0;
  auto& q = recv ? end->rq : end->sq;
  const std::string where = std::string(recv ? "receive" : "send") + " queue of side" +
                            std::to_string(side) + " qp " + std::to_string(wc.qp_num);
  trace("wc " + where + " wr" + std::to_string(wc.wr_id & ~kRecvFlag) + " " + to_string(wc.status) +
        " len=" + std::to_string(wc.byte_len));
  if (q.empty())
    return fail("unexpected completion (duplicate?) wr_id " + std::to_string(wc.wr_id & ~kRecvFlag) +
                " status " + to_string(wc.status) + " on " + where);
  const Expected e = q.front();
  if (wc.wr_id != e.wr_id) {
    auto it = std::find_if(q.begin(), q.end(), [&](const Expected& x) { return x.wr_id == wc.wr_id; });
    fail(std::string(it == q.end() ? "duplicate or unknown" : "out-of-order") + " completion wr_id " +
         std::to_string(wc.wr_id & ~kRecvFlag) + " on " + where + ", expected wr_id " +
         std::to_string(e.wr_id & ~kRecvFlag) + " (" + e.what + ")");
    if (it != q.end()) q.erase(it);
    return;
  }
  q.pop_front();
  if (wc.status != e.status)
    return fail(e.what + " on " + where + ": status " + to_string(wc.status) + ", expected " +
                to_string(e.status));
  if (e.status != WcStatus::kSuccess) return;
  if (wc.opcode != e.opcode)
    fail(e.what + " on " + where + ": wc opcode " + std::to_string(static_cast<int>(wc.opcode)) +
         ", expected " + std::to_string(static_cast<int>(e.opcode)));
  if (e.check_len && wc.byte_len != e.byte_len)
    fail(e.what + " on " + where + ": byte_len " + std::to_string(wc.byte_len) + ", expected " +
         std::to_string(e.byte_len));
  const bool has_imm = (wc.wc_flags & kWcWithImm) != 0;
  if (recv && has_imm != e.imm) fail(e.what + " on " + where + ": immediate flag wrong");
  if (recv && e.imm && wc.imm_data != e.imm_data) fail(e.what + " on " + where + ": immediate data wrong");
}

// Affiliated errors (IBA 11.6.3.1) are expected only once a protection fault
// was posted; before that any of them means the engine failed a QP on its own.
void Case::on_async(int side, const AsyncEvent& ev) {
  trace("async side" + std::to_string(side) + " type " + std::to_string(static_cast<int>(ev.type)) +
        " element " + std::to_string(ev.element));
  const bool error = ev.type == AsyncEventType::kQpFatal || ev.type == AsyncEventType::kQpReqErr ||
                     ev.type == AsyncEventType::kQpAccessErr || ev.type == AsyncEventType::kCqErr;
  if (error && !fault_posted_)
    fail("async error event " + std::to_string(static_cast<int>(ev.type)) + " on side" + std::to_string(side) +
         " element " + std::to_string(ev.element) + " without any fault posted");
}

bool Case::drained() const {
  if (pending_posts_ != 0) return false;
  for (const End& x : ends_)
    if (!x.sq.empty() || !x.rq.empty()) return false;
  return true;
}

bool Case::run_until_drained(Time limit, const char* phase) {
  while (!drained()) {
    if (sim_.next_event_time() > limit || !sim_.step()) break;
  }
  if (drained()) return true;
  size_t sq = 0, rq = 0;
  std::string first;
  for (const End& x : ends_) {
    sq += x.sq.size();
    rq += x.rq.size();
    if (first.empty() && !x.sq.empty()) first = x.sq.front().what;
    if (first.empty() && !x.rq.empty()) first = x.rq.front().what;
  }
  fail(std::string("hang in ") + phase + ": " + std::to_string(sq) + " send and " + std::to_string(rq) +
       " receive completions missing at t=" + std::to_string(sim_.now().ps / 1000000) +
       "us (first: " + first + ")");
  return false;
}

void Case::check_memory(int side) {
  Side& s = sides_[side];
  auto mem = s.host->memory().at(s.base, s.used);
  for (uint64_t i = 0; i < s.used; ++i)
    if (s.dont_care[i]) s.shadow[i] = mem[i];
  if (std::memcmp(mem.data(), s.shadow.data(), s.used) == 0) return;
  uint64_t bad = 0, first = 0;
  for (uint64_t i = 0; i < s.used; ++i)
    if (mem[i] != s.shadow[i]) {
      if (bad++ == 0) first = i;
    }
  if (bad == 0) return;
  const uint64_t addr = s.base + first;
  std::string where = "outside every region (guard bytes)";
  auto in = [&](const Region& r) { return addr >= r.addr && addr < r.addr + r.len; };
  for (size_t k = 0; k < s.data.size(); ++k)
    if (in(s.data[k])) where = "data region " + std::to_string(k) + " +" + std::to_string(addr - s.data[k].addr);
  if (in(s.ro)) where = "read-only region";
  if (in(s.wo)) where = "write-only region";
  if (in(s.noatomic)) where = "no-atomic region";
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
  fail("memory of side" + std::to_string(side) + " differs from the model in " + std::to_string(bad) +
       " bytes; first at " + buf + " (" + where + "): got " +
       std::to_string(static_cast<unsigned>(mem[first])) + ", expected " +
       std::to_string(static_cast<unsigned>(s.shadow[first])));
}

void Case::run() {
  if (!build()) return;
  if ((cfg_.ops & PropertyConfig::kOpAll) == 0) return fail("no operation class enabled");
  const uint64_t n = static_cast<uint64_t>(rng_.range(1, std::max<uint32_t>(cfg_.max_ops, 1)));
  std::vector<Time> times(n);
  for (auto& t : times) t = Time{} + Duration::nanos(rng_.range(0, 300000));
  std::sort(times.begin(), times.end());
  for (Time t : times) generate_op(t);

  switch (cfg_.sabotage) {
    case PropertyConfig::Sabotage::kCorruptWrite:
      sides_[1].host->memory().inject_write_fault(1 + rng_.below(3));
      sides_[0].host->memory().inject_write_fault(1 + rng_.below(3));
      break;
    case PropertyConfig::Sabotage::kWriteOutside:
      sim_.call_at(Time{} + Duration::micros(1), [this](Time) {
        const std::byte junk[4] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
        const Side& s = sides_[0];
        static_cast<MemoryAccess&>(s.host->memory()).write(s.data[0].addr - 8, junk);
      });
      break;
    default: break;
  }
  const Time limit = Time{} + cfg_.limit;
  bool ok = run_until_drained(limit, "operations");
  if (ok && res_.ok && cfg_.faults && rng_.chance(0.35) && fault_phase())
    run_until_drained(sim_.now() + cfg_.limit, "fault");
  // Late duplicates, stray ACKs and timers, then the engines must go idle.
  sim_.run(sim_.now() + Duration::millis(20));
  sim_.run(Time::never(), 1'000'000);
  if (sim_.pending() != 0)
    fail("engines do not go idle: events still scheduled after 1M more (next at t=" +
         std::to_string(sim_.next_event_time().ps / 1000000) + "us)");

  for (int s = 0; s < 2; ++s) {
    check_memory(s);
    Host& h = *sides_[s].host;
    const MemoryStats& ms = h.memory().stats();
    if (ms.faults) fail("side" + std::to_string(s) + ": engine accessed memory outside the host's arena " + std::to_string(ms.faults) + " times");
    if (ms.audit_violations)
      fail("side" + std::to_string(s) + ": engine wrote outside every registered region " +
           std::to_string(ms.audit_violations) + " times");
    const EngineStats& es = h.engine().stats();
    uint64_t parse_drops = 0;
    for (int r = kRxDropParseShort; r <= kRxDropParseBadLength; ++r) parse_drops += es.rx_drop_reason[r];
    parse_drops += es.rx_drop_reason[kRxDropBadInt];  // a flipped bit can look like a bad INT shim/echo
    if (es.rx_bad_icrc + parse_drops != h.stats().rx_corrupted)
      fail("side" + std::to_string(s) + ": " + std::to_string(h.stats().rx_corrupted) +
           " corrupted frames delivered but " + std::to_string(es.rx_bad_icrc) + " ICRC and " +
           std::to_string(parse_drops) + " parse drops");
    res_.retransmits += es.retransmits;
    res_.naks += es.naks_sent;
    res_.rnr_naks += es.rnr_naks_sent;
    res_.timeouts += es.timeouts;
    if (h.stats().stalls) fail("side" + std::to_string(s) + ": next_deadline() was due but did nothing " + std::to_string(h.stats().stalls) + " times");
  }
  check_lossy();
  const LinkStats ls = net_.total_link_stats();
  res_.frames_lost = ls.lost() + ls.queue_drops;
  res_.frames_corrupted = ls.corrupted;
  res_.frames_duplicated = ls.duplicated;
  res_.events = sim_.events_run();
  res_.sim_time_us = static_cast<double>(sim_.now().ps) / 1e6;
}

// Lossy mode: counters for the summary; both ends of a pair agree on the
// mode (negotiation), a compatible-only case never switches; and under pure
// path reordering (nothing lost, no RNR) nothing is retransmitted spuriously.
void Case::check_lossy() {
  uint64_t rnr = 0;
  for (const End& x : ends_) {
    auto st = x.q.host->engine().qp_stats(x.q.qpn);
    if (!st) continue;
    const QpStats& q = *st;
    const bool on = q.mode == QpMode::kLossy;
    res_.lossy_qps += on ? 1 : 0;
    res_.selective_retransmits += q.selective_retransmits;
    res_.spurious_retransmits += q.spurious_retransmits;
    res_.trims_received += q.trims_received;
    res_.sacks_sent += q.sacks_sent;
    rnr += q.rnr_naks_received;
    if (on && !res_.lossy)
      fail("qp " + std::to_string(x.q.qpn) + " switched to lossy mode with lossy mode off");
    if (q.trims_received && !res_.trimming) fail("trimmed packets without trimming switches");
  }
  if (res_.pure_reorder && res_.ok && rnr == 0 && !fault_posted_) {
    const LinkStats ls = net_.total_link_stats();
    if (ls.lost() + ls.queue_drops == 0 && res_.spurious_retransmits != 0)
      fail("pure path reordering: " + std::to_string(res_.spurious_retransmits) +
           " spurious retransmissions (expected 0)");
  }
}

}  // namespace prop

PropertyResult run_property_case(uint64_t seed, const PropertyConfig& cfg) {
  PropertyResult res;
  res.seed = seed;
  prop::Case c(seed, cfg, res);
  c.run();
  return res;
}

}  // namespace sroce::sim
