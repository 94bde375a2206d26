// sroce status | qps | lanes [--json] [--dev sroce0 | --socket PATH]
#include "cmd_daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "sroce_abi.h"

namespace sroce::cli {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.1f} {}", b, units[u]);
}

uint64_t u(const nlohmann::json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<uint64_t>() : 0;
}

std::string s(const nlohmann::json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// A plain text table: columns padded to their widest cell.
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) out += fmt::format("{:<{}}{}", r[i], w[i], i + 1 < r.size() ? "  " : "");
    out += "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  return out;
}

}  // namespace

std::string daemon_socket_path(const std::string& dev) {
  if (const char* e = getenv("SROCE_SOCKET"); e && *e) return e;
  return fmt::format("{}/{}.sock", SROCE_RUN_DIR, dev);
}

Result<nlohmann::json> fetch_daemon_stats(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{errno, fmt::format("socket: {}", strerror(errno))};
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    close(fd);
    return Error{e, fmt::format("{}: {} (is sroced running? see `systemctl status sroced`)", path, strerror(e))};
  }
  struct {
    sroce_msg_hdr h;
    sroce_stats_req r;
  } req{};
  req.h.magic = SROCE_ABI_MAGIC;
  req.h.op = SROCE_OP_STATS;
  req.h.len = sizeof req.r;
  req.h.seq = 1;
  std::vector<char> in(SROCE_MAX_MSG + 64);
  alignas(8) unsigned char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{in.data(), in.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  pollfd p{fd, POLLIN, 0};
  ssize_t n = -1;
  if (send(fd, &req, sizeof req, MSG_NOSIGNAL) == sizeof req && poll(&p, 1, 5000) == 1)
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  close(fd);
  if (n < static_cast<ssize_t>(sizeof(sroce_msg_hdr))) return Error{EIO, path + ": no answer from sroced"};
  sroce_msg_hdr h;
  memcpy(&h, in.data(), sizeof h);
  int memfd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(&memfd, CMSG_DATA(c), sizeof memfd);
  if (h.magic != SROCE_ABI_MAGIC || h.op != SROCE_OP_STATS || h.status != 0) {
    if (memfd >= 0) close(memfd);
    return Error{h.status ? -h.status : EPROTO,
                 fmt::format("{}: sroced refused the request: {}", path, strerror(h.status ? -h.status : EPROTO))};
  }
  std::string text(in.data() + sizeof h, static_cast<size_t>(n) - sizeof h);
  if (memfd >= 0) {  // too large for one message
    off_t size = lseek(memfd, 0, SEEK_END);
    text.assign(size > 0 ? static_cast<size_t>(size) : 0, '\0');
    ssize_t rd = pread(memfd, text.data(), text.size(), 0);
    close(memfd);
    if (rd < 0) return Error{errno, "reading the statistics memfd failed"};
    text.resize(strnlen(text.c_str(), text.size()));
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Error{EPROTO, path + ": sroced sent statistics that are not JSON"};
  return j;
}

std::string render_status(const nlohmann::json& j) {
  std::string out;
  std::vector<std::string> gids;
  for (const auto& g : j.value("gids", nlohmann::json::array())) gids.push_back(g.get<std::string>());
  out += fmt::format("{}: netdev {}  mtu {}  udp port {}  pid {}  up {:.0f} s\n", s(j, "device"), s(j, "netdev"),
                     u(j, "mtu"), u(j, "udp_port"), u(j, "pid"), j.value("uptime_s", 0.0));
  out += fmt::format("  GIDs: {}\n  socket: {}\n", fmt::join(gids, ", "), s(j, "socket"));
  const auto& o = j["objects"];
  out += fmt::format("  objects: {} contexts, {} PDs, {} MRs, {} CQs, {} QPs, {} SRQs, {} AHs, {} channels\n",
                     j["contexts"].size(), u(o, "pds"), u(o, "mrs"), u(o, "cqs"), u(o, "qps"), u(o, "srqs"),
                     u(o, "ahs"), u(o, "channels"));
  const auto& d = j["datapath"];
  out += fmt::format("  datapath {} (gso {}, gro {}): rx {} pkts {} in {} batches, tx {} pkts {} in {} sends\n",
                     s(d, "kind"), s(d, "gso"), s(d, "gro"), u(d, "rx_packets"), human_bytes(u(d, "rx_bytes")),
                     u(d, "rx_batches"), u(d, "tx_packets"), human_bytes(u(d, "tx_bytes")), u(d, "tx_sends"));
  out += fmt::format("    errors: rx {} dropped {}  tx {} full {} port {}\n", u(d, "rx_errors"), u(d, "rx_dropped"),
                     u(d, "tx_errors"), u(d, "tx_full"), u(d, "tx_port_errors"));
  const auto& e = j["engine"];
  out += fmt::format(
      "  engine: rx {} dropped {} (bad icrc {}, unknown qp {}), tx {}, retransmits {}, timeouts {}, naks {}/{} "
      "(sent/received), rnr naks {}/{}\n",
      u(e, "rx_packets"), u(e, "rx_dropped"), u(e, "rx_bad_icrc"), u(e, "rx_unknown_qp"), u(e, "tx_packets"),
      u(e, "retransmits"), u(e, "timeouts"), u(e, "naks_sent"), u(e, "naks_received"), u(e, "rnr_naks_sent"),
      u(e, "rnr_naks_received"));
  // docs/security.md: drops by reason (the wire's peer checks among them),
  // the key mode and the per-uid limits at work.
  if (e.contains("rx_drop_reason") && !e["rx_drop_reason"].empty()) {
    std::vector<std::string> rs;
    for (const auto& [name, n] : e["rx_drop_reason"].items()) rs.push_back(fmt::format("{} {}", name, n.get<uint64_t>()));
    out += fmt::format("    drops: {}\n", fmt::join(rs, ", "));
  }
  if (j.contains("keys")) out += fmt::format("  keys: {}\n", s(j, "keys"));
  if (j.contains("limits")) {
    const auto& l = j["limits"];
    out += fmt::format(
        "  limits per uid: {} contexts, {} QPs, {} MRs, {} registered, {} ring fds, HELLO within {} ms\n"
        "    refused: contexts {} qps {} mrs {} mr_bytes {} ring_fds {} qkey {}; hello timeouts {}, accept errors {} "
        "(paused {})\n",
        u(l, "contexts_per_uid"), u(l, "qps_per_uid"), u(l, "mrs_per_uid"), human_bytes(u(l, "mr_bytes_per_uid")),
        u(l, "ring_fds_per_uid"), u(l, "hello_timeout_ms"), u(l, "refused_contexts"), u(l, "refused_qps"),
        u(l, "refused_mrs"), u(l, "refused_mr_bytes"), u(l, "refused_ring_fds"), u(l, "qkey_eperm"),
        u(l, "hello_timeouts"), u(l, "accept_errors"), u(l, "accept_pauses"));
  }
  const auto& v = j["service"];
  out += fmt::format(
      "  service: {} requests ({} errors, {} garbage, {} refused), {} WQEs, {} CQEs, {} comp / {} async events, {} "
      "dropped\n",
      u(v, "ctl_requests"), u(v, "ctl_errors"), u(v, "ctl_garbage"), u(v, "ctl_refused"), u(v, "ring_wqes"),
      u(v, "cqes"), u(v, "comp_events"), u(v, "async_events"), u(v, "event_drops"));
  const auto& m = j["memory"];
  out += fmt::format("  memory: read {} in {} calls, wrote {} in {} calls ({} through {} shared MRs), refused {}, failed {}\n",
                     human_bytes(u(m, "bytes_read")), u(m, "reads"), human_bytes(u(m, "bytes_written")),
                     u(m, "writes"), human_bytes(u(m, "shared_bytes")), u(v, "mrs_shared"), u(m, "refused"),
                     u(m, "failed"));
  if (!j["contexts"].empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : j["contexts"])
      rows.push_back({s(c, "id"), s(c, "pid"), s(c, "uid"), s(c, "pds"), s(c, "mrs"), s(c, "cqs"), s(c, "qps"),
                      s(c, "srqs"), s(c, "ahs"), s(c, "requests")});
    out += "\n" + table({"CONTEXT", "PID", "UID", "PDS", "MRS", "CQS", "QPS", "SRQS", "AHS", "REQUESTS"}, rows);
  }
  return out;
}

std::string render_qps(const nlohmann::json& j) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : j.value("qps", nlohmann::json::array())) {
    rows.push_back({s(q, "qpn"), s(q, "type"), s(q, "state"), q.contains("mode") ? s(q, "mode") : "-", s(q, "pid"),
                    s(q, "dest_qpn"), s(q, "path_mtu"), std::to_string(u(q, "tx_packets")),
                    human_bytes(u(q, "tx_bytes")), std::to_string(u(q, "rx_packets")), human_bytes(u(q, "rx_bytes")),
                    std::to_string(u(q, "retransmits")), std::to_string(u(q, "selective_retransmits")),
                    std::to_string(u(q, "spurious_retransmits")), std::to_string(u(q, "timeouts")),
                    std::to_string(u(q, "naks_received")), std::to_string(q.value("lanes", nlohmann::json::array()).size()),
                    s(q, "send_wqes"), s(q, "recv_wqes")});
  }
  if (rows.empty()) return "no QPs\n";
  return table({"QPN", "TYPE", "STATE", "MODE", "PID", "DEST", "MTU", "TX_PKTS", "TX", "RX_PKTS", "RX", "RETX",
                "SEL_RETX", "SPURIOUS", "TIMEOUTS", "NAKS_RX", "LANES", "SEND_WQES", "RECV_WQES"},
               rows);
}

std::string render_lanes(const nlohmann::json& j) {
  // The transport's lanes: each lossy-mode QP's source ports with the
  // engine's per-lane counters (docs/lossy.md). Compatible QPs have one port
  // each, which the datapath's table below shows.
  std::vector<std::vector<std::string>> qrows;
  for (const auto& q : j.value("qps", nlohmann::json::array())) {
    if (q.value("mode", "") != "lossy") continue;  // a compatible QP is its one source port
    for (const auto& l : q.value("lanes", nlohmann::json::array())) {
      const double srtt = l.value("srtt_us", 0.0);
      qrows.push_back({s(q, "qpn"), s(l, "sport"), l.value("active", false) ? "yes" : "retired",
                       std::to_string(u(l, "tx_packets")), std::to_string(u(l, "retransmits")),
                       std::to_string(u(l, "naks")), std::to_string(u(l, "losses_detected")),
                       srtt > 0 ? fmt::format("{:.1f}", srtt) : "-"});
    }
  }
  std::string out;
  if (!qrows.empty())
    out += table({"QPN", "SPORT", "ACTIVE", "TX_PKTS", "RETX", "NAKS", "LOSSES", "SRTT_US"}, qrows) + "\n";
  // The datapath's view: every UDP source port it sent from.
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : j.value("lanes", nlohmann::json::array())) {
    uint64_t sends = u(l, "tx_sends"), pk = u(l, "tx_packets");
    rows.push_back({s(l, "sport"), s(l, "local"), std::to_string(pk), human_bytes(u(l, "tx_bytes")),
                    std::to_string(sends), sends ? fmt::format("{:.1f}", double(pk) / double(sends)) : "-"});
  }
  if (rows.empty()) return out + "no lanes used yet\n";
  return out + table({"SPORT", "LOCAL", "TX_PKTS", "TX", "SENDS", "PKTS/SEND"}, rows);
}

void add_daemon_commands(CLI::App& app, int& rc) {
  struct Opts {
    std::string dev = "sroce0";
    std::string socket;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  auto add = [&](const char* name, const char* help, std::string (*render)(const nlohmann::json&),
                 const char* key) {
    auto* c = app.add_subcommand(name, help);
    c->add_option("--dev", opts->dev, "RDMA device (its socket is /run/sroce/<dev>.sock)")->capture_default_str();
    c->add_option("--socket", opts->socket, "sroced control socket (overrides --dev and $SROCE_SOCKET)");
    c->add_flag("--json", opts->json, "print JSON instead of a table");
    c->callback([opts, render, key, &rc] {
      std::string path = opts->socket.empty() ? daemon_socket_path(opts->dev) : opts->socket;
      auto st = fetch_daemon_stats(path);
      if (!st) {
        fprintf(stderr, "sroce: %s\n", st.error().message.c_str());
        rc = 1;
        return;
      }
      if (opts->json) {
        printf("%s\n", (key ? (*st)[key] : *st).dump(2).c_str());
      } else {
        fputs(render(*st).c_str(), stdout);
      }
      rc = 0;
    });
  };
  add("status", "sroced: device, addresses, contexts, objects and counters", render_status, nullptr);
  add("qps", "sroced: one line per QP with its counters", render_qps, "qps");
  add("lanes", "sroced: one line per lane (UDP source port) with its counters", render_lanes, "lanes");
}

}  // namespace sroce::cli
