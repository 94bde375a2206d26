#include "progs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "telemetry/telemetry.h"
// After the layout header: the skeleton names its struct types.
#include "sroce_tm.skel.h"

namespace sroce::tmtest {

Progs::Progs(uint32_t max_paths, uint32_t max_pending) {
  skel_ = sroce_tm__open();
  if (!skel_) throw std::runtime_error("sroce_tm__open failed");
  bpf_map__set_max_entries(skel_->maps.paths, max_paths);
  bpf_map__set_max_entries(skel_->maps.pending, max_pending);
  if (int rc = sroce_tm__load(skel_); rc != 0) {
    sroce_tm__destroy(skel_);
    throw std::runtime_error("loading the telemetry programs failed (the verifier log is above): " +
                             std::string(std::strerror(-rc)));
  }
}

Progs::~Progs() { sroce_tm__destroy(skel_); }

int Progs::run(Dir dir, const std::vector<uint8_t>& frame, uint32_t gso_segs, uint32_t gso_size) {
  __sk_buff ctx{};
  ctx.gso_segs = gso_segs;
  ctx.gso_size = gso_size;
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data(),
              .data_size_in = static_cast<uint32_t>(frame.size()), .ctx_in = &ctx,
              .ctx_size_in = sizeof(ctx), .repeat = 1);
  const int fd = bpf_program__fd(dir == Dir::kEgress ? skel_->progs.sroce_tm_egress
                                                     : skel_->progs.sroce_tm_ingress);
  if (int rc = bpf_prog_test_run_opts(fd, &o); rc != 0) {
    throw std::runtime_error("BPF_PROG_TEST_RUN failed: " + std::string(std::strerror(-rc)));
  }
  return static_cast<int>(o.retval);
}

Snapshot Progs::snap() const {
  auto s = telemetry::read_snapshot_fds(bpf_map__fd(skel_->maps.paths),
                                        bpf_map__fd(skel_->maps.stats), -1);
  if (!s) throw std::runtime_error(s.error().message);
  s->max_paths = bpf_map__max_entries(skel_->maps.paths);
  s->max_pending = bpf_map__max_entries(skel_->maps.pending);
  return std::move(*s);
}

int Progs::pending_fd() const { return bpf_map__fd(skel_->maps.pending); }

const PathRow* find(const Snapshot& s, Dir dir, uint16_t sport, uint32_t dqpn) {
  for (const PathRow& p : s.paths) {
    if (p.dir == dir && p.sport == sport && p.dqpn == dqpn) return &p;
  }
  return nullptr;
}

uint64_t stat(const Snapshot& s, unsigned slot) { return s.stats.at(slot); }

uint64_t result_sum(const Snapshot& s) {
  uint64_t n = 0;
  for (unsigned i = SROCE_TM_STAT_ROCE_SKBS; i <= SROCE_TM_STAT_BAD_GSO; ++i) n += s.stats[i];
  return n;
}

}  // namespace sroce::tmtest
