// sroce telemetry attach | detach | dump | stats | services | serve
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "http_server.h"
#include "prometheus.h"
#include "proto/roce.h"
#include "telemetry/tm_loader.h"
#include "telemetry_view.h"
#include "top_view.h"

namespace sroce::cli {

namespace {

using telemetry::Snapshot;

struct Common {
  std::string pin_dir = SROCE_TM_DEFAULT_PIN_DIR;
};

void add_pin_dir(CLI::App* c, Common& o) {
  c->add_option("--pin-dir", o.pin_dir, "BPF filesystem directory of the pinned programs and maps")
      ->capture_default_str();
}

int error(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "sroce telemetry %s: %s\n", cmd, msg.c_str());
  return 1;
}

struct AttachOpts {
  Common common;
  std::string iface;
  std::string netns;
  std::string btf;
  uint32_t max_paths = 0;
  uint32_t max_pending = 0;
  bool all = false;
};

sroce_tm_config make_config(const AttachOpts& o) {
  sroce_tm_config c{};
  c.pin_dir = o.common.pin_dir.c_str();
  c.netns = o.netns.empty() ? nullptr : o.netns.c_str();
  c.btf_path = o.btf.empty() ? nullptr : o.btf.c_str();
  c.max_paths = o.max_paths;
  c.max_pending = o.max_pending;
  return c;
}

int run_attach(const AttachOpts& o) {
  char err[512] = "";
  const sroce_tm_config c = make_config(o);
  const int r = sroce_tm_attach(o.iface.c_str(), &c, err, sizeof(err));
  if (r < 0) return error("attach", err);
  std::printf("%s %s%s%s (tc clsact ingress+egress); maps in %s\n",
              r == SROCE_TM_ALREADY_ATTACHED ? "already attached to" : "attached to",
              o.iface.c_str(), o.netns.empty() ? "" : " in netns ", o.netns.c_str(),
              o.common.pin_dir.c_str());
  return 0;
}

int run_detach(const AttachOpts& o) {
  char err[512] = "";
  const sroce_tm_config c = make_config(o);
  if (o.all) {
    const int r = sroce_tm_detach_all(&c, err, sizeof(err));
    if (r < 0) return error("detach", err);
    std::printf("%s\n", r == SROCE_TM_NOT_ATTACHED ? "nothing was attached" : "detached from all");
    return 0;
  }
  if (o.iface.empty()) return error("detach", "give an interface, or --all");
  const int r = sroce_tm_detach(o.iface.c_str(), &c, err, sizeof(err));
  if (r < 0) return error("detach", err);
  std::printf("%s %s\n", r == SROCE_TM_NOT_ATTACHED ? "was not attached to" : "detached from",
              o.iface.c_str());
  return 0;
}

struct DumpOpts {
  Common common;
  bool json = false;
};

int run_dump(const DumpOpts& o) {
  auto s = telemetry::read_snapshot(o.common.pin_dir);
  if (!s) return error("dump", s.error().message);
  if (o.json) {
    std::cout << telemetry::paths_json(*s).dump() << "\n";
    return 0;
  }
  telemetry::TopOptions t;
  t.peers = t.lanes = false;
  t.paths = true;
  t.limit = SIZE_MAX;
  t.title = "sroce telemetry dump: every path";
  std::cout << telemetry::render_top(*s, nullptr, 0, t);
  return 0;
}

int run_stats(const DumpOpts& o) {
  auto s = telemetry::read_snapshot(o.common.pin_dir);
  if (!s) return error("stats", s.error().message);
  if (o.json) {
    std::cout << telemetry::stats_json(*s).dump() << "\n";
    return 0;
  }
  for (unsigned i = 0; i < SROCE_TM_STAT_COUNT; ++i) {
    std::printf("%-16s %llu\n", sroce_tm_stat_name(static_cast<sroce_tm_stat>(i)),
                static_cast<unsigned long long>(s->stats[i]));
  }
  std::printf("%-16s %zu/%u (evicted %llu)\n", "paths", s->paths.size(), s->max_paths,
              static_cast<unsigned long long>(s->evicted()));
  for (const auto& a : s->attachments) std::printf("attached         %s\n", a.ifname.c_str());
  return 0;
}

struct ServicesOpts {
  Common common;
  double window_s = 10;
  bool json = false;
};

// The live 5-tuples (UDP, destination port 4791) and QPs: the service view.
int run_services(const ServicesOpts& o) {
  auto s = telemetry::read_snapshot(o.common.pin_dir);
  if (!s) return error("services", s.error().message);
  const auto live = telemetry::live_paths(*s, static_cast<uint64_t>(o.window_s * 1e9));
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : live) {
    const bool eg = p.dir == telemetry::Dir::kEgress;
    const std::string local = telemetry::format_addr(p.local),
                      peer = telemetry::format_addr(p.peer);
    a.push_back({{"dir", telemetry::dir_name(p.dir)},
                 {"src", eg ? local : peer},
                 {"dst", eg ? peer : local},
                 {"proto", "udp"},
                 {"sport", p.sport},
                 {"dport", SROCE_UDP_PORT},
                 {"dqpn", p.dqpn},
                 {"idle_ms", (s->taken_ns - std::min(s->taken_ns, p.last_ns)) / 1000000}});
  }
  if (o.json) {
    std::cout << a.dump() << "\n";
    return 0;
  }
  for (const auto& e : a) {
    std::printf("%-7s udp %s:%u -> %s:%u qp %u (idle %llu ms)\n",
                e["dir"].get<std::string>().c_str(), e["src"].get<std::string>().c_str(),
                e["sport"].get<unsigned>(), e["dst"].get<std::string>().c_str(),
                e["dport"].get<unsigned>(), e["dqpn"].get<unsigned>(),
                static_cast<unsigned long long>(e["idle_ms"].get<uint64_t>()));
  }
  return 0;
}

struct ServeOpts {
  Common common;
  telemetry::HttpOptions http;
  telemetry::PromOptions prom;
};

int run_serve(const ServeOpts& o) {
  auto handler = [&](const std::string& path) -> telemetry::HttpResponse {
    if (path == "/metrics") {
      auto s = telemetry::read_snapshot(o.common.pin_dir);
      if (!s) return {503, "text/plain; charset=utf-8", s.error().message + "\n"};
      return {200, "text/plain; version=0.0.4; charset=utf-8",
              telemetry::render_prometheus(*s, o.prom)};
    }
    if (path == "/") {
      return {200, "text/plain; charset=utf-8", "sroce telemetry exporter: see /metrics\n"};
    }
    return {404, "text/plain; charset=utf-8", "not found: try /metrics\n"};
  };
  auto r = telemetry::serve_http(o.http, handler, [&](uint16_t port) {
    std::printf("sroce telemetry: serving http://%s:%u/metrics\n", o.http.address.c_str(), port);
    std::fflush(stdout);
  });
  if (!r) return error("serve", r.error().message);
  return 0;
}

}  // namespace

void add_telemetry_commands(CLI::App& app, int& rc) {
  auto* t = app.add_subcommand("telemetry", "per-path RoCEv2 telemetry (tc eBPF programs)");
  t->require_subcommand(1);

  // Option storage lives as long as the callbacks that read it.
  auto attach = std::make_shared<AttachOpts>();
  auto detach = std::make_shared<AttachOpts>();
  auto* a = t->add_subcommand("attach", "attach the programs to IFACE (tc clsact ingress+egress)");
  a->add_option("iface", attach->iface, "interface")->required();
  a->add_option("--netns", attach->netns, "network namespace (name in /run/netns, or a path)");
  a->add_option("--btf", attach->btf, "kernel BTF file for libbpf (the programs need no CO-RE)");
  a->add_option("--max-paths", attach->max_paths, "paths map size (first load only)")
      ->check(CLI::Range(1u, 1u << 24));
  a->add_option("--max-pending", attach->max_pending, "RTT pending-request map size (first load)")
      ->check(CLI::Range(1u, 1u << 24));
  add_pin_dir(a, attach->common);
  a->callback([&rc, attach] { rc = run_attach(*attach); });

  auto* d = t->add_subcommand("detach", "detach from IFACE (the last detach unpins the maps)");
  d->add_option("iface", detach->iface, "interface");
  d->add_option("--netns", detach->netns, "network namespace (name in /run/netns, or a path)");
  d->add_flag("--all", detach->all, "detach from every interface and unpin everything");
  add_pin_dir(d, detach->common);
  d->callback([&rc, detach] { rc = run_detach(*detach); });

  auto dump = std::make_shared<DumpOpts>();
  auto stats = std::make_shared<DumpOpts>();
  auto* du = t->add_subcommand("dump", "every path and its counters");
  du->add_flag("--json", dump->json, "a JSON array of path objects");
  add_pin_dir(du, dump->common);
  du->callback([&rc, dump] { rc = run_dump(*dump); });

  auto* st = t->add_subcommand("stats", "the programs' own counters (drops by cause, map use)");
  st->add_flag("--json", stats->json, "JSON");
  add_pin_dir(st, stats->common);
  st->callback([&rc, stats] { rc = run_stats(*stats); });

  auto services = std::make_shared<ServicesOpts>();
  auto* sv = t->add_subcommand("services", "live 5-tuples and QPs seen in the last window");
  sv->add_option("--window", services->window_s, "seconds")->capture_default_str();
  sv->add_flag("--json", services->json, "JSON");
  add_pin_dir(sv, services->common);
  sv->callback([&rc, services] { rc = run_services(*services); });

  auto serve = std::make_shared<ServeOpts>();
  auto* se = t->add_subcommand("serve", "Prometheus exporter (text format on /metrics)");
  se->add_option("--listen", serve->http.address, "address to listen on")->capture_default_str();
  se->add_option("--port", serve->http.port, "TCP port (0: any free port)")->capture_default_str();
  se->add_option("--max-peers", serve->prom.max_peers, "peers exported (others fold into 'other')")
      ->capture_default_str();
  se->add_option("--max-paths", serve->prom.max_paths,
                 "worst paths exported with sport/dqpn labels")
      ->capture_default_str();
  se->add_option("--max-requests", serve->http.max_requests, "exit after this many requests");
  add_pin_dir(se, serve->common);
  se->callback([&rc, serve] { rc = run_serve(*serve); });
}

}  // namespace sroce::cli
