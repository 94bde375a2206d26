// The exporter end to end: `sroce telemetry serve` on a free loopback port,
// scraped over HTTP, its text parsed strictly as Prometheus text format, and
// its numbers checked against the dump of the same maps.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "live.h"
#include "prom_text.h"
#include "proto/roce.h"

extern char** environ;

using namespace sroce::tmtest;

namespace {

// `sroce telemetry serve --port 0 ...` as a child; we learn its port from
// the line it prints.
class Server {
 public:
  Server(const Cli& cli, std::vector<std::string> extra) {
    std::vector<std::string> argv{SROCE_BIN, "telemetry", "serve",  "--port",
                                  "0",       "--pin-dir", cli.pin()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    int p[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    REQUIRE(posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    std::string line;
    char c;
    while (read(p[0], &c, 1) == 1 && c != '\n') line += c;
    close(p[0]);
    const auto colon = line.rfind(':');
    REQUIRE(colon != std::string::npos);
    port_ = static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
  }
  ~Server() {
    kill(pid_, SIGTERM);
    int st;
    waitpid(pid_, &st, 0);
  }
  // GET path; returns "status\nbody".
  std::pair<int, std::string> get(const std::string& path) const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    REQUIRE(write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size()));
    std::string resp;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
    close(fd);
    const auto sp = resp.find(' ');
    const auto body = resp.find("\r\n\r\n");
    REQUIRE(sp != std::string::npos);
    REQUIRE(body != std::string::npos);
    return {std::stoi(resp.substr(sp + 1, 3)), resp.substr(body + 4)};
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace

TEST_CASE("exporter: Prometheus text that parses strictly and matches the dump") {
  NetnsPair n;
  Cli cli(SROCE_BIN);
  {
    Server before(cli, {"--max-requests", "1"});
    CHECK(before.get("/metrics").first == 503);  // nothing attached yet
  }
  cli.attach_pair(n);
  UdpSock rx(n.ns_b, n.b4s, SROCE_UDP_PORT);
  size_t sent = 0;
  for (uint16_t i = 0; i < 5; ++i) {
    UdpSock tx(n.ns_a, n.a4s, static_cast<uint16_t>(42000 + i));
    tx.connect_to(n.b4s, SROCE_UDP_PORT);
    tx.set_ecn(i == 0 ? 3 : 0);
    for (uint32_t psn = 0; psn < 10u + i; ++psn) {
      Roce r;
      r.psn = psn;
      r.dqpn = 7;
      r.payload = 200;
      tx.send(roce_payload(r));
      ++sent;
    }
  }
  size_t got = 0;
  while (got < sent && !rx.recv().empty()) ++got;
  REQUIRE(got == sent);

  Server srv(cli, {"--max-paths", "3"});
  const auto [status, text] = srv.get("/metrics");
  REQUIRE(status == 200);
  auto doc = parse_prometheus(text);
  INFO(text);
  REQUIRE(doc.ok());
  CHECK(prometheus_convention_problems(*doc).empty());
  for (const auto& f : doc->families) CHECK(f.name.rfind("sroce_", 0) == 0);

  const std::map<std::string, std::string> eg = {
      {"dir", "egress"}, {"local", n.a4s}, {"peer", n.b4s}};
  const std::map<std::string, std::string> in = {
      {"dir", "ingress"}, {"local", n.b4s}, {"peer", n.a4s}};
  for (const auto* labels : {&eg, &in}) {
    const auto* p = doc->find("sroce_wire_packets_total", *labels);
    REQUIRE(p);
    CHECK(p->value == static_cast<double>(sent));
    CHECK(doc->find("sroce_wire_ce_marks_total", *labels)->value == 10);
    CHECK(doc->find("sroce_wire_paths", *labels)->value == 5);
  }
  // The same numbers as the dump.
  double bytes = 0;
  for (const auto& e : cli.dump()) {
    if (e["dir"] == "egress") bytes += e["bytes"].get<double>();
  }
  CHECK(doc->find("sroce_wire_bytes_total", eg)->value == bytes);
  // Bounded: 3 of 10 paths with sport/dqpn labels.
  CHECK(doc->all("sroce_path_packets_total").size() == 3);
  CHECK(doc->find("sroce_telemetry_series_omitted", {{"level", "path"}})->value == 7);
  CHECK(doc->find("sroce_telemetry_attached_interfaces", {})->value == 2);
  CHECK(doc->find("sroce_telemetry_skbs_total", {{"result", "roce_skbs"}})->value ==
        static_cast<double>(2 * sent));

  CHECK(srv.get("/nope").first == 404);
  CHECK(srv.get("/").first == 200);
}
