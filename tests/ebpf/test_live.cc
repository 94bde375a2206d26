// Live: two network namespaces joined by a veth pair, the programs attached to
// both ends with the sroce CLI, RoCEv2 datagrams sent through real UDP
// sockets. The dumped counts must equal what was sent, exactly.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <net/if.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "live.h"
#include "proto/roce.h"
#include "telemetry/tm_loader.h"

using namespace sroce::tmtest;
using nlohmann::json;

namespace {

struct Want {
  uint64_t packets = 0, bytes = 0, ce = 0, retx = 0, ooo = 0;
};

// The dump entry for (dir, local, peer, sport, dqpn), or null.
const json* entry(const json& dump, const char* dir, const std::string& local,
                  const std::string& peer, unsigned sport, unsigned dqpn) {
  for (const json& e : dump) {
    if (e["dir"] == dir && e["local"] == local && e["peer"] == peer && e["sport"] == sport &&
        e["dqpn"] == dqpn) {
      return &e;
    }
  }
  return nullptr;
}

void check_entry(const json* e, const Want& w) {
  REQUIRE(e);
  INFO(e->dump());
  CHECK((*e)["packets"] == w.packets);
  CHECK((*e)["bytes"] == w.bytes);
  CHECK((*e)["ce"] == w.ce);
  CHECK((*e)["retx"] == w.retx);
  CHECK((*e)["ooo"] == w.ooo);
  CHECK((*e)["cnp"] == 0);
}

// Drain `want` datagrams from s (the receiver): proof they crossed the veth.
size_t drain(UdpSock& s, size_t want) {
  size_t got = 0;
  while (got < want && !s.recv(3000).empty()) ++got;
  return got;
}

}  // namespace

TEST_CASE("live: 16 source ports, duplicated PSNs, CE marks: exact counts") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  cli.attach_pair(n);
  UdpSock rx(n.ns_b, n.b4s, SROCE_UDP_PORT);

  std::map<uint16_t, Want> want;
  size_t sent = 0;
  for (uint16_t i = 0; i < 16; ++i) {
    const uint16_t sport = static_cast<uint16_t>(40000 + i * 7);
    UdpSock tx(n.ns_a, n.a4s, sport);
    tx.connect_to(n.b4s, SROCE_UDP_PORT);
    Want& w = want[sport];
    // PSNs 0..(8+i); ports with i % 3 == 0 resend two of them (go-back).
    std::vector<uint32_t> psns;
    for (uint32_t p = 0; p <= 8u + i; ++p) psns.push_back(p);
    if (i % 3 == 0) {
      psns.push_back(3);
      psns.push_back(4);
      w.retx = 2;
    }
    for (size_t k = 0; k < psns.size(); ++k) {
      // CE on every packet of ports i % 4 == 1, on every other one of i % 4 == 2.
      const bool ce = i % 4 == 1 || (i % 4 == 2 && k % 2 == 0);
      tx.set_ecn(ce ? 3 : 0);
      Roce r;
      r.dqpn = 0x100 + i;
      r.psn = psns[k];
      r.payload = 32 + 16 * i;
      tx.send(roce_payload(r));
      ++w.packets;
      w.bytes += wire_bytes(false, r);
      w.ce += ce;
      ++sent;
    }
  }
  REQUIRE(drain(rx, sent) == sent);

  const json d = cli.dump();
  REQUIRE(d.is_array());
  CHECK(d.size() == 32);  // 16 egress paths on a, 16 ingress paths on b
  unsigned i = 0;
  for (const auto& [sport, w] : want) {
    INFO("sport " << sport);
    check_entry(entry(d, "egress", n.a4s, n.b4s, sport, 0x100 + i), w);
    check_entry(entry(d, "ingress", n.b4s, n.a4s, sport, 0x100 + i), w);
    ++i;
  }
  const json st = cli.stats();
  CHECK(st["stats"]["roce_pkts"] == 2 * sent);
  CHECK(st["stats"]["path_full"] == 0);
  CHECK(st["paths_evicted"] == 0);
  CHECK(st["attachments"].size() == 2);
}

TEST_CASE("live: IPv6 and UDP GSO batches are counted per packet") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  cli.attach_pair(n);
  UdpSock rx(n.ns_b, n.b6s, SROCE_UDP_PORT);
  UdpSock tx(n.ns_a, n.a6s, 45000);
  tx.connect_to(n.b6s, SROCE_UDP_PORT);

  // sroce's datapath: one send of 8 equal-sized RoCEv2 packets, UDP GSO
  // segmenting them, each its own BTH, consecutive PSNs.
  Roce r;
  r.dqpn = 0x42;
  r.payload = 1000;
  const size_t seg = roce_len(r);
  tx.set_gso(static_cast<uint16_t>(seg));
  auto batch = [&](uint32_t first_psn) {
    std::vector<uint8_t> buf;
    for (uint32_t k = 0; k < 8; ++k) {
      r.psn = first_psn + k;
      const auto p = roce_payload(r);
      buf.insert(buf.end(), p.begin(), p.end());
    }
    return buf;
  };
  tx.send(batch(0));
  tx.set_ecn(3);
  tx.send(batch(4));  // PSNs 4..11: 4..7 again, CE-marked
  REQUIRE(drain(rx, 16) == 16);

  Want w;
  w.packets = 16;
  w.bytes = 16 * wire_bytes(true, r);
  w.ce = 8;
  w.retx = 4;
  const json d = cli.dump();
  CHECK(d.size() == 2);
  check_entry(entry(d, "egress", n.a6s, n.b6s, 45000, 0x42), w);
  check_entry(entry(d, "ingress", n.b6s, n.a6s, 45000, 0x42), w);
  // The batches really were GSO skbs (else this test tests nothing new).
  const json st = cli.stats();
  CHECK(st["stats"]["gso_skbs"].get<uint64_t>() >= 2);
  CHECK(st["stats"]["roce_pkts"] == 32);
}

TEST_CASE("live: request -> ACK round-trip times") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  cli.attach_pair(n);
  UdpSock req(n.ns_a, n.a4s, 47000);            // requester's lane
  UdpSock acks(n.ns_a, n.a4s, SROCE_UDP_PORT);  // ACKs come to 4791
  UdpSock resp(n.ns_b, n.b4s, SROCE_UDP_PORT);  // responder: requests in
  UdpSock resp_tx(n.ns_b, n.b4s, 48000);        // ... and ACKs out
  req.connect_to(n.b4s, SROCE_UDP_PORT);
  resp_tx.connect_to(n.a4s, SROCE_UDP_PORT);

  unsigned acked = 0;
  for (uint32_t psn = 100; psn < 120; ++psn) {
    Roce r;
    r.dqpn = 0x21;
    r.psn = psn;
    r.ack_req = psn % 2 == 0;
    r.payload = 64;
    req.send(roce_payload(r));
    const auto got = resp.recv();
    REQUIRE(!got.empty());
    sroce_bth bth{};
    sroce_bth_read(got.data(), &bth);
    if (!bth.ack_req) continue;
    // The responder ACKs that PSN to the requester's QP (IBA 9.7.5.1).
    Roce a;
    a.opcode = SROCE_OP_ACK;
    a.dqpn = 0x77;
    a.psn = bth.psn;
    a.syndrome = sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID);
    resp_tx.send(roce_payload(a));
    REQUIRE(!acks.recv().empty());
    ++acked;
  }
  REQUIRE(acked == 10);

  const json d = cli.dump();
  const json* eg = entry(d, "egress", n.a4s, n.b4s, 47000, 0x21);
  const json* ack_in = entry(d, "ingress", n.a4s, n.b4s, 48000, 0x77);
  REQUIRE(eg);
  REQUIRE(ack_in);
  CHECK((*eg)["rtt_samples"] == 10);
  uint64_t hist = 0;
  for (const auto& v : (*eg)["rtt_hist"]) hist += v.get<uint64_t>();
  CHECK(hist == 10);
  CHECK((*eg)["rtt_sum_ns"].get<uint64_t>() > 0);
  // A veth round trip through two namespaces takes well under a second.
  CHECK((*eg)["rtt_sum_ns"].get<uint64_t>() < 10ull * 1000000000ull);
  CHECK((*ack_in)["acks"] == 10);
  const json st = cli.stats();
  CHECK(st["stats"]["rtt_samples"] == 10);
  CHECK(st["stats"]["rtt_unmatched"] == 0);
}

namespace {

// A foreign tc filter (someone else's), to check detach leaves it alone:
// a two-instruction program returning TC_ACT_UNSPEC.
int foreign_prog() {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, TC_ACT_UNSPEC},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "foreign", "GPL", insns, 2, nullptr);
}

int filters(const std::string& ns, const std::string& ifc, bool ingress) {
  int n = 0;
  in_netns(ns, [&] {
    n = sroce_tm_tc_count_filters(static_cast<int>(if_nametoindex(ifc.c_str())), ingress);
  });
  return n;
}

int has_clsact(const std::string& ns, const std::string& ifc) {
  int n = 0;
  in_netns(ns, [&] { n = sroce_tm_tc_has_clsact(static_cast<int>(if_nametoindex(ifc.c_str()))); });
  return n;
}

}  // namespace

TEST_CASE("live: attach and detach are idempotent, errors are clear, hooks are cleaned up") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  std::string out;
  REQUIRE(cli.run({"telemetry", "attach", "--netns", n.ns_a, n.if_a}, &out) == 0);
  CHECK(out.find("attached to " + n.if_a) != std::string::npos);
  REQUIRE(cli.run({"telemetry", "attach", "--netns", n.ns_a, n.if_a}, &out) == 0);
  CHECK(out.find("already attached") != std::string::npos);
  REQUIRE(cli.run({"telemetry", "attach", "--netns", n.ns_b, n.if_b}, &out) == 0);
  CHECK(filters(n.ns_a, n.if_a, true) > 0);
  CHECK(filters(n.ns_a, n.if_a, false) > 0);

  SECTION("errors") {
    CHECK(cli.run({"telemetry", "attach", "--netns", n.ns_a, "nope0"}, &out) == 1);
    CHECK(out.find("interface 'nope0' not found") != std::string::npos);
    CHECK(cli.run({"telemetry", "attach", "--netns", "no-such-netns-5c0e", n.if_a}, &out) == 1);
    CHECK(out.find("network namespace 'no-such-netns-5c0e' not found") != std::string::npos);
    CHECK(cli.run({"telemetry", "detach", "--netns", n.ns_a, "nope0"}, &out) == 1);
    CHECK(out.find("not found") != std::string::npos);
    // A BTF file that is missing: said so, before anything is loaded.
    Cli fresh(SROCE_BIN);
    CHECK(fresh.run(
              {"telemetry", "attach", "--netns", n.ns_a, "--btf", "/nonexistent/vmlinux", n.if_a},
              &out) == 1);
    CHECK(out.find("BTF file /nonexistent/vmlinux not found") != std::string::npos);
    // A reader with nothing attached says how to fix it.
    CHECK(fresh.run({"telemetry", "dump"}, &out) == 1);
    CHECK(out.find("not attached") != std::string::npos);
  }
  SECTION("detach keeps other filters, removes the qdisc when it is ours alone") {
    const int fd = foreign_prog();
    REQUIRE(fd >= 0);
    DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_EGRESS);
    DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = fd, .handle = 1, .priority = 1);
    in_netns(n.ns_a, [&] {
      hook.ifindex = static_cast<int>(if_nametoindex(n.if_a.c_str()));
      REQUIRE(bpf_tc_attach(&hook, &opts) == 0);
    });
    REQUIRE(filters(n.ns_a, n.if_a, false) > 0);

    REQUIRE(cli.run({"telemetry", "detach", "--netns", n.ns_a, n.if_a}, &out) == 0);
    CHECK(out.find("detached from " + n.if_a) != std::string::npos);
    CHECK(filters(n.ns_a, n.if_a, true) == 0);  // ours gone from ingress
    CHECK(filters(n.ns_a, n.if_a, false) > 0);  // the foreign one stays, with its qdisc
    REQUIRE(cli.run({"telemetry", "detach", "--netns", n.ns_a, n.if_a}, &out) == 0);
    CHECK(out.find("was not attached") != std::string::npos);
    CHECK(filters(n.ns_a, n.if_a, false) > 0);

    in_netns(n.ns_a, [&] {
      DECLARE_LIBBPF_OPTS(bpf_tc_opts, del, .handle = 1, .priority = 1);
      REQUIRE(bpf_tc_detach(&hook, &del) == 0);
    });
    close(fd);
    // b still attached: the maps stay pinned.
    CHECK(access((cli.pin() + "/paths").c_str(), F_OK) == 0);
    REQUIRE(cli.run({"telemetry", "detach", "--netns", n.ns_b, n.if_b}, &out) == 0);
    CHECK(has_clsact(n.ns_a, n.if_a) == 1);  // a: the qdisc the foreign filter kept stays
    CHECK(has_clsact(n.ns_b, n.if_b) == 0);  // b: removed with our filters
    // The last detach unpins everything.
    CHECK(access(cli.pin().c_str(), F_OK) != 0);
  }
}

TEST_CASE("live: top --once, services and dump show the same traffic") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  cli.attach_pair(n);
  UdpSock rx(n.ns_b, n.b4s, SROCE_UDP_PORT);
  size_t sent = 0;
  for (uint16_t sport : {41000, 41001, 41002}) {
    UdpSock tx(n.ns_a, n.a4s, sport);
    tx.connect_to(n.b4s, SROCE_UDP_PORT);
    for (uint32_t psn = 0; psn < 20; ++psn) {
      Roce r;
      r.psn = psn;
      r.payload = 100;
      tx.send(roce_payload(r));
      ++sent;
      if (sport == 41001 && psn % 4 == 3) {  // this lane retransmits a lot
        tx.send(roce_payload(r));
        ++sent;
      }
    }
  }
  REQUIRE(drain(rx, sent) == sent);

  std::string out;
  REQUIRE(cli.run({"top", "--once", "--interval", "0.2"}, &out) == 0);
  INFO(out);
  const size_t lanes = out.find("LANES");
  REQUIRE(out.find("PEERS") != std::string::npos);
  REQUIRE(lanes != std::string::npos);
  CHECK(out.find(n.b4s) != std::string::npos);
  // The lossiest lane comes first.
  const size_t first_row = out.find('\n', out.find("DIR", lanes)) + 1;
  const std::string row = out.substr(first_row, out.find('\n', first_row) - first_row);
  CHECK(row.find("41001") != std::string::npos);
  CHECK(out.find("\x1b[") == std::string::npos);  // no escape codes when not a terminal

  REQUIRE(cli.run({"telemetry", "services", "--json", "--window", "60"}, &out) == 0);
  const json sv = json::parse(out);
  unsigned egress = 0;
  for (const json& e : sv) {
    CHECK(e["dport"] == SROCE_UDP_PORT);
    CHECK(e["proto"] == "udp");
    if (e["dir"] == "egress") {
      ++egress;
      CHECK(e["src"] == n.a4s);
      CHECK(e["dst"] == n.b4s);
    } else {
      CHECK(e["src"] == n.a4s);  // ingress on b: the peer a is the source
      CHECK(e["dst"] == n.b4s);
    }
  }
  CHECK(egress == 3);
  CHECK(sv.size() == 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(cli.run({"telemetry", "services", "--json", "--window", "0.1"}, &out) == 0);
  CHECK(json::parse(out).empty());

  REQUIRE(cli.run({"telemetry", "dump"}, &out) == 0);
  CHECK(out.find("PATHS (6,") != std::string::npos);
}
