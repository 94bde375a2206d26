// wire-tour: every opcode the engine can send, each at least once, in a
// capture meant for the wire checkers (tests/wire). Two hosts back to back;
// RC and UC at MTU 256 so a 700-byte message is FIRST/MIDDLE/LAST; steps run
// one after another, each waiting for its completions:
//
//   RC  SEND only/multi, with immediate, with invalidate; WRITE only/multi,
//       with immediate; READ only/multi; CMP_SWAP; FETCH_ADD; a WRITE whose
//       middle packet the link drops (NAK sequence error); a SEND with no
//       receive posted (RNR NAK), the receive posted 30 us later
//   UC  SEND only/multi, with immediate; WRITE only/multi, with immediate
//   UD  SEND only, with immediate
//
// A census of the frames on the wire checks the tour really produced every
// opcode, a NAK and an RNR NAK, and that every ICRC verifies.
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "proto/icrc.h"
#include "proto/packet.h"
#include "sroce/sim/synth.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/verbs_setup.h"
#include "util.h"

namespace sroce::sim {

namespace {

// Counts opcodes (and ACK syndromes) of every delivered frame; forwards to the pcap.
class Census final : public FrameTap {
 public:
  explicit Census(FrameTap* next) : next_(next) {}
  void on_frame(const Link& link, const Packet& pkt, Time now) override {
    if (next_) next_->on_frame(link, pkt, now);
    sroce_pkt p{};
    const uint8_t* raw = pkt.bytes();
    if (sroce_parse(raw, pkt.head, &p) != SROCE_PARSE_OK) {
      ++unparsed;
      return;
    }
    if (!icrc_ok(pkt.payload(), pkt.meta)) ++bad_icrc;
    ++by_name[p.op->name];
    if (p.op->flags & SROCE_HAS_AETH) {
      switch (sroce_aeth_type(p.aeth.syndrome)) {
        case SROCE_AETH_NAK: ++naks[sroce_aeth_value(p.aeth.syndrome)]; break;
        case SROCE_AETH_RNR_NAK: ++rnr_naks; break;
        default: break;
      }
    }
  }
  std::map<std::string, uint64_t> by_name;
  std::map<int, uint64_t> naks;  // by NAK code
  uint64_t rnr_naks = 0;
  uint64_t unparsed = 0;
  uint64_t bad_icrc = 0;

 private:
  FrameTap* next_;
};

const char* const kExpected[] = {
    "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_LAST_WITH_IMMEDIATE", "RC_SEND_ONLY",
    "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_SEND_LAST_WITH_INVALIDATE", "RC_SEND_ONLY_WITH_INVALIDATE",
    "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
    "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST", "RC_RDMA_READ_RESPONSE_MIDDLE",
    "RC_RDMA_READ_RESPONSE_LAST", "RC_RDMA_READ_RESPONSE_ONLY", "RC_ACKNOWLEDGE",
    "RC_ATOMIC_ACKNOWLEDGE", "RC_CMP_SWAP", "RC_FETCH_ADD",
    "UC_SEND_FIRST", "UC_SEND_MIDDLE", "UC_SEND_LAST", "UC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_ONLY",
    "UC_SEND_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE",
    "UC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY",
    "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "UD_SEND_ONLY", "UD_SEND_ONLY_WITH_IMMEDIATE",
};

constexpr uint32_t kGrh = 40;  // UD receive buffers start with room for the GRH (IBA 11.4.1.2)
constexpr uint64_t kRegion = 1u << 20;

class Tour {
 public:
  Tour(const ScenarioOptions& opt, Reporter& rep) : opt_(opt), rep_(rep), sim_(opt.seed), net_(sim_) {}

  int run();

 private:
  struct Step {
    std::string name;
    uint32_t want_client = 0;  // completions expected on the requester
    uint32_t want_server = 0;  // ... and on the responder
    std::function<bool(Step&)> post;
    std::function<std::string()> check;  // empty string = data verified
  };

  bool setup(std::string* err);
  void add_steps();
  bool run_step(Step& s, Json& out);

  // Post helpers; offsets are fresh per step so each step's data is checkable.
  uint64_t take(uint32_t len) {
    const uint64_t off = next_off_;
    next_off_ = (next_off_ + len + 63) / 64 * 64;
    return off;
  }
  bool post_recv(QpEnd& q, uint64_t off, uint32_t len, uint64_t id);
  bool post_send(QpEnd& q, WrOpcode op, uint64_t off, uint32_t len, uint64_t id, uint32_t imm = 0,
                 uint32_t inv = 0, uint64_t compare_add = 0, uint64_t swap = 0);
  std::string same(uint64_t client_off, uint64_t server_off, uint32_t len);
  Step send_step(const std::string& name, QpEnd& q, WrOpcode op, uint32_t len, bool ud = false);
  Step write_step(const std::string& name, QpEnd& q, WrOpcode op, uint32_t len);

  const ScenarioOptions& opt_;
  Reporter& rep_;
  Simulator sim_;
  Network net_;
  BackToBack bb_;
  std::unique_ptr<PcapWriter> pcap_;
  std::unique_ptr<Census> census_;
  QpEnd rc_c_, rc_s_, uc_c_, uc_s_, ud_c_, ud_s_;
  uint64_t cbase_ = 0, sbase_ = 0;
  MrKeys ckeys_, skeys_;
  std::vector<MrKeys> inv_mrs_;
  uint64_t next_off_ = 0;
  std::vector<Wc> client_wcs_, server_wcs_;
  std::vector<Step> steps_;
};

bool Tour::post_recv(QpEnd& q, uint64_t off, uint32_t len, uint64_t id) {
  const Sge sge{sbase_ + off, len, skeys_.lkey};
  RecvWr wr;
  wr.wr_id = id;
  wr.sgl = std::span<const Sge>(&sge, 1);
  return q.host->post_recv(q.qpn, wr) == 0;
}

bool Tour::post_send(QpEnd& q, WrOpcode op, uint64_t off, uint32_t len, uint64_t id, uint32_t imm,
                     uint32_t inv, uint64_t compare_add, uint64_t swap) {
  const Sge sge{cbase_ + off, len, ckeys_.lkey};
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.send_flags = kSendSignaled;
  wr.sgl = std::span<const Sge>(&sge, len ? 1 : 0);
  wr.imm_data = imm;
  wr.invalidate_rkey = inv;
  wr.rdma.remote_addr = sbase_ + off;
  wr.rdma.rkey = skeys_.rkey;
  wr.atomic.remote_addr = sbase_ + off;
  wr.atomic.rkey = skeys_.rkey;
  wr.atomic.compare_add = compare_add;
  wr.atomic.swap = swap;
  wr.ud.ah = q.ah;
  wr.ud.remote_qpn = ud_s_.qpn;
  wr.ud.remote_qkey = 0x11111111;
  return q.host->post_send(q.qpn, wr) == 0;
}

std::string Tour::same(uint64_t client_off, uint64_t server_off, uint32_t len) {
  auto c = bb_.a->memory().at(cbase_ + client_off, len);
  auto v = bb_.b->memory().at(sbase_ + server_off, len);
  if (std::equal(c.begin(), c.end(), v.begin())) return "";
  return "data differs (" + std::to_string(len) + " bytes at client +" + std::to_string(client_off) +
         " / server +" + std::to_string(server_off) + ")";
}

Tour::Step Tour::send_step(const std::string& name, QpEnd& q, WrOpcode op, uint32_t len, bool ud) {
  Step s;
  s.name = name;
  s.want_client = 1;
  s.want_server = 1;
  const uint64_t off = take(len + kGrh);
  s.post = [this, &q, op, len, off, ud](Step&) {
    uint32_t inv = 0;
    if (op == WrOpcode::kSendWithInv) {
      auto r = bb_.b->engine().reg_mr(rc_s_.pd, sbase_, 4096, kAccessLocalWrite | kAccessRemoteRead);
      if (!r) return false;
      inv_mrs_.push_back(*r);
      inv = r->rkey;
    }
    return post_recv(ud ? ud_s_ : (&q == &rc_c_ ? rc_s_ : uc_s_), off, len + (ud ? kGrh : 0), 1) &&
           post_send(q, op, off + (ud ? kGrh : 0), len, 1, 0xc0ffee00u + len, inv);
  };
  s.check = [this, off, len, ud, op]() -> std::string {
    const Wc& w = server_wcs_.back();
    const bool imm = op == WrOpcode::kSendWithImm;
    if (w.byte_len != len + (ud ? kGrh : 0)) return "receive byte_len " + std::to_string(w.byte_len);
    if (imm && (!(w.wc_flags & kWcWithImm) || w.imm_data != 0xc0ffee00u + len)) return "immediate data missing";
    if (op == WrOpcode::kSendWithInv && (!(w.wc_flags & kWcWithInv) || w.imm_data != inv_mrs_.back().rkey))
      return "invalidated rkey not reported";
    return same(off + (ud ? kGrh : 0), off + (ud ? kGrh : 0), len);
  };
  return s;
}

Tour::Step Tour::write_step(const std::string& name, QpEnd& q, WrOpcode op, uint32_t len) {
  Step s;
  s.name = name;
  const bool imm = op == WrOpcode::kRdmaWriteWithImm;
  s.want_client = 1;
  s.want_server = imm ? 1 : 0;
  const uint64_t off = take(len);
  s.post = [this, &q, op, len, off, imm](Step&) {
    if (imm && !post_recv(&q == &rc_c_ ? rc_s_ : uc_s_, 0, 0, 2)) return false;
    return post_send(q, op, off, len, 2, 0xabc00000u + len);
  };
  s.check = [this, off, len, imm]() -> std::string {
    if (imm) {
      const Wc& w = server_wcs_.back();
      if (w.opcode != WcOpcode::kRecvRdmaWithImm || w.imm_data != 0xabc00000u + len)
        return "WRITE with immediate: receive completion wrong";
    }
    return same(off, off, len);
  };
  return s;
}

bool Tour::setup(std::string* err) {
  HostConfig hc;
  hc.engine.seed = opt_.seed;
  // The tour is of plain RoCEv2 (IBA opcodes, as any peer and tshark's
  // dissector see them): keep the QPs in compatible mode, or two sroce engines
  // negotiate lossy mode and its extension headers.
  hc.engine.lossy.enable = false;
  hc.arena_bytes = 2 * kRegion;
  LinkConfig lc;
  lc.rate_bps = 25'000'000'000ull;
  lc.delay = Duration::micros(2);
  bb_ = build_back_to_back(net_, hc, lc, lc);
  bool pcap_failed = false;
  pcap_ = attach_pcap(net_, opt_, rep_, &pcap_failed);
  if (pcap_failed) {
    *err = "pcap";
    return false;
  }
  census_ = std::make_unique<Census>(pcap_.get());
  net_.set_tap(census_.get());

  QpOptions rc;
  rc.mtu = Mtu::k256;
  rc.min_rnr_timer = 1;  // 0.01 ms: the RNR retry comes soon after the NAK
  QpOptions uc = rc;
  uc.type = QpType::kUc;
  QpOptions ud = rc;
  ud.type = QpType::kUd;
  auto prc = make_qp_pair(*bb_.a, *bb_.b, rc, opt_.seed);
  if (!prc) return *err = prc.error().message, false;
  rc_c_ = prc->first;
  rc_s_ = prc->second;
  // UC and UD QPs share the RC QPs' PDs, so one MR per side serves all.
  auto more = [&](const QpOptions& o, QpEnd& c, QpEnd& sv, uint32_t psn) -> bool {
    auto ec = create_qp_end(*bb_.a, o, rc_c_.pd);
    if (!ec) return *err = ec.error().message, false;
    auto es = create_qp_end(*bb_.b, o, rc_s_.pd);
    if (!es) return *err = es.error().message, false;
    ec->sq_psn = psn;
    es->sq_psn = psn + 0x1000;
    if (auto r = connect_qp(*ec, *es, o, es->sq_psn, sim_.now()); !r) return *err = r.error().message, false;
    if (auto r = connect_qp(*es, *ec, o, ec->sq_psn, sim_.now()); !r) return *err = r.error().message, false;
    c = *ec;
    sv = *es;
    return true;
  };
  if (!more(uc, uc_c_, uc_s_, 0x100) || !more(ud, ud_c_, ud_s_, 0x200)) return false;

  cbase_ = bb_.a->memory().alloc(kRegion, 4096);
  sbase_ = bb_.b->memory().alloc(kRegion, 4096);
  auto cmem = bb_.a->memory().at(cbase_, kRegion);
  Rng fill(opt_.seed);
  for (auto& b : cmem) b = static_cast<std::byte>(fill.next());
  auto smem = bb_.b->memory().at(sbase_, kRegion);
  for (auto& b : smem) b = static_cast<std::byte>(fill.next());
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  auto ck = reg_region(*bb_.a, rc_c_.pd, cbase_, kRegion, acc);
  if (!ck) return *err = ck.error().message, false;
  auto sk = reg_region(*bb_.b, rc_s_.pd, sbase_, kRegion, acc);
  if (!sk) return *err = sk.error().message, false;
  ckeys_ = *ck;
  skeys_ = *sk;
  bb_.a->on_completion([this](Host&, Handle, const Wc& wc, Time) { client_wcs_.push_back(wc); });
  bb_.b->on_completion([this](Host&, Handle, const Wc& wc, Time) { server_wcs_.push_back(wc); });
  return true;
}

void Tour::add_steps() {
  // RC sends: ONLY, FIRST/MIDDLE/LAST, with immediate, with invalidate.
  steps_.push_back(send_step("rc send only", rc_c_, WrOpcode::kSend, 100));
  steps_.push_back(send_step("rc send first/middle/last", rc_c_, WrOpcode::kSend, 700));
  steps_.push_back(send_step("rc send only imm", rc_c_, WrOpcode::kSendWithImm, 100));
  steps_.push_back(send_step("rc send last imm", rc_c_, WrOpcode::kSendWithImm, 700));
  steps_.push_back(send_step("rc send only inv", rc_c_, WrOpcode::kSendWithInv, 100));
  steps_.push_back(send_step("rc send last inv", rc_c_, WrOpcode::kSendWithInv, 700));
  // RC writes.
  steps_.push_back(write_step("rc write only", rc_c_, WrOpcode::kRdmaWrite, 100));
  steps_.push_back(write_step("rc write first/middle/last", rc_c_, WrOpcode::kRdmaWrite, 700));
  steps_.push_back(write_step("rc write only imm", rc_c_, WrOpcode::kRdmaWriteWithImm, 100));
  steps_.push_back(write_step("rc write last imm", rc_c_, WrOpcode::kRdmaWriteWithImm, 700));
  // RC reads: response ONLY, and FIRST/MIDDLE/LAST.
  for (uint32_t len : {100u, 700u}) {
    Step s;
    s.name = len == 100 ? "rc read response only" : "rc read response first/middle/last";
    s.want_client = 1;
    const uint64_t off = take(len);
    s.post = [this, off, len](Step&) { return post_send(rc_c_, WrOpcode::kRdmaRead, off, len, 3); };
    s.check = [this, off, len] { return same(off, off, len); };
    steps_.push_back(std::move(s));
  }
  // RC atomics -> ATOMIC_ACK with the original value.
  for (bool cas : {true, false}) {
    Step s;
    s.name = cas ? "rc cmp_swap" : "rc fetch_add";
    s.want_client = 1;
    const uint64_t off = take(8);
    auto orig = std::make_shared<uint64_t>(0);
    s.post = [this, off, cas, orig](Step&) {
      std::memcpy(orig.get(), bb_.b->memory().at(sbase_ + off, 8).data(), 8);
      return cas ? post_send(rc_c_, WrOpcode::kAtomicCmpSwp, off, 8, 4, 0, 0, *orig, 0x1122334455667788ull)
                 : post_send(rc_c_, WrOpcode::kAtomicFetchAdd, off, 8, 4, 0, 0, 0x1000001, 0);
    };
    s.check = [this, off, cas, orig]() -> std::string {
      uint64_t got = 0, now = 0;
      std::memcpy(&got, bb_.a->memory().at(cbase_ + off, 8).data(), 8);
      std::memcpy(&now, bb_.b->memory().at(sbase_ + off, 8).data(), 8);
      if (got != *orig) return "original value not returned";
      if (now != (cas ? 0x1122334455667788ull : *orig + 0x1000001)) return "target not updated";
      return "";
    };
    steps_.push_back(std::move(s));
  }
  // NAK: the link drops the MIDDLE packet of a 3-packet WRITE; the responder
  // answers the LAST with NAK PSN sequence error (IBA 9.7.5.1.2), the
  // requester goes back and resends.
  {
    Step s = write_step("rc write, middle dropped -> NAK", rc_c_, WrOpcode::kRdmaWrite, 700);
    auto inner = s.post;
    s.post = [this, inner](Step& st) {
      bb_.ab->impairments().drop_frames.push_back(bb_.ab->stats().tx_frames + 1);
      return inner(st);
    };
    steps_.push_back(std::move(s));
  }
  // RNR NAK: a SEND arrives before its receive is posted (IBA 9.7.5.2.8).
  {
    Step s;
    s.name = "rc send before receive -> RNR NAK";
    s.want_client = 1;
    s.want_server = 1;
    const uint64_t off = take(100);
    s.post = [this, off](Step&) {
      sim_.call_at(sim_.now() + Duration::micros(30), [this, off](Time) { post_recv(rc_s_, off, 100, 5); });
      return post_send(rc_c_, WrOpcode::kSend, off, 100, 5);
    };
    s.check = [this, off] { return same(off, off, 100); };
    steps_.push_back(std::move(s));
  }
  // UC.
  steps_.push_back(send_step("uc send only", uc_c_, WrOpcode::kSend, 100));
  steps_.push_back(send_step("uc send first/middle/last", uc_c_, WrOpcode::kSend, 700));
  steps_.push_back(send_step("uc send only imm", uc_c_, WrOpcode::kSendWithImm, 100));
  steps_.push_back(send_step("uc send last imm", uc_c_, WrOpcode::kSendWithImm, 700));
  steps_.push_back(write_step("uc write only", uc_c_, WrOpcode::kRdmaWrite, 100));
  steps_.push_back(write_step("uc write first/middle/last", uc_c_, WrOpcode::kRdmaWrite, 700));
  steps_.push_back(write_step("uc write only imm", uc_c_, WrOpcode::kRdmaWriteWithImm, 100));
  steps_.push_back(write_step("uc write last imm", uc_c_, WrOpcode::kRdmaWriteWithImm, 700));
  // UD.
  steps_.push_back(send_step("ud send only", ud_c_, WrOpcode::kSend, 100, true));
  steps_.push_back(send_step("ud send only imm", ud_c_, WrOpcode::kSendWithImm, 100, true));
}

bool Tour::run_step(Step& s, Json& out) {
  const size_t c0 = client_wcs_.size(), s0 = server_wcs_.size();
  const Time t0 = sim_.now();
  std::string err;
  if (!s.post(s)) {
    err = "posting failed";
  } else {
    const Time deadline = t0 + Duration::millis(50);
    while (client_wcs_.size() - c0 < s.want_client || server_wcs_.size() - s0 < s.want_server) {
      if (sim_.next_event_time() > deadline || !sim_.step()) break;
    }
    // Let trailing ACKs and anything unexpected show up before judging.
    sim_.run(sim_.now() + Duration::micros(20));
    const size_t nc = client_wcs_.size() - c0, ns = server_wcs_.size() - s0;
    if (nc != s.want_client || ns != s.want_server) {
      err = "completions: requester " + std::to_string(nc) + "/" + std::to_string(s.want_client) +
            ", responder " + std::to_string(ns) + "/" + std::to_string(s.want_server);
    }
    for (size_t i = c0; err.empty() && i < client_wcs_.size(); ++i)
      if (client_wcs_[i].status != WcStatus::kSuccess)
        err = std::string("requester completion ") + to_string(client_wcs_[i].status);
    for (size_t i = s0; err.empty() && i < server_wcs_.size(); ++i)
      if (server_wcs_[i].status != WcStatus::kSuccess)
        err = std::string("responder completion ") + to_string(server_wcs_[i].status);
    if (err.empty() && s.check) err = s.check();
  }
  out = {{"step", s.name}, {"ok", err.empty()}, {"t_us", to_us(t0)}, {"took_us", to_us(sim_.now() - t0)}};
  if (!err.empty()) out["error"] = err;
  // Gap between steps, so each is easy to find in the capture.
  sim_.run(sim_.now() + Duration::micros(10));
  return err.empty();
}

int Tour::run() {
  std::string err;
  if (!setup(&err)) {
    if (err != "pcap") rep_.error(err);
    rep_.summary({{"scenario", "wire-tour"}, {"ok", false}, {"error", err}});
    return 1;
  }
  add_steps();
  uint32_t passed = 0;
  Json failed = Json::array();
  for (Step& s : steps_) {
    Json out;
    if (run_step(s, out))
      ++passed;
    else
      failed.push_back(s.name);
    rep_.event("step", out);
  }
  Json missing = Json::array();
  for (const char* name : kExpected)
    if (census_->by_name.count(name) == 0) missing.push_back(name);
  const uint64_t seq_naks = census_->naks.count(SROCE_NAK_PSN_SEQ_ERR) ? census_->naks[SROCE_NAK_PSN_SEQ_ERR] : 0;
  Json seen = Json::array();
  for (const auto& [name, n] : census_->by_name) seen.push_back({{"opcode", name}, {"frames", n}});
  rep_.event("census", {{"opcodes", seen}, {"nak_seq_err", seq_naks}, {"rnr_nak", census_->rnr_naks}});
  const bool ok = failed.empty() && missing.empty() && seq_naks > 0 && census_->rnr_naks > 0 &&
                  census_->bad_icrc == 0 && census_->unparsed == 0;
  Json sum = {{"scenario", "wire-tour"},
              {"ok", ok},
              {"seed", opt_.seed},
              {"steps", steps_.size()},
              {"steps_passed", passed},
              {"failed_steps", failed},
              {"opcodes_seen", census_->by_name.size()},
              {"opcodes_missing", missing},
              {"nak_seq_err", seq_naks},
              {"rnr_nak", census_->rnr_naks},
              {"frames_bad_icrc", census_->bad_icrc},
              {"frames_unparsed", census_->unparsed},
              {"sim_time_us", to_us(sim_.now())}};
  if (pcap_) {
    pcap_->close();
    sum["pcap"] = opt_.pcap;
    sum["pcap_frames"] = pcap_->frames();
  }
  rep_.summary(sum);
  return ok ? 0 : 1;
}

}  // namespace

int scenario_wire_tour(const ScenarioOptions& opt, Reporter& rep) {
  Tour t(opt, rep);
  return t.run();
}

}  // namespace sroce::sim
