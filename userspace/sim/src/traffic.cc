#include "sroce/sim/traffic.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

namespace sroce::sim {

Result<FlowSizeCdf> FlowSizeCdf::from_rows(std::vector<std::pair<double, double>> rows) {
  if (rows.size() < 2) return Error{EINVAL, "flow-size CDF: need at least 2 rows"};
  if (rows.front().second != 0.0)
    return Error{EINVAL, "flow-size CDF: the first row must have CDF 0, got " +
                             std::to_string(rows.front().second)};
  if (std::abs(rows.back().second - 100.0) > 1e-9)
    return Error{EINVAL, "flow-size CDF: the last row must have CDF 100, got " +
                             std::to_string(rows.back().second)};
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].first < rows[i - 1].first || rows[i].second < rows[i - 1].second)
      return Error{EINVAL, "flow-size CDF: row " + std::to_string(i + 1) + " decreases"};
  FlowSizeCdf c;
  c.rows_ = std::move(rows);
  return c;
}

Result<FlowSizeCdf> FlowSizeCdf::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{ENOENT, "flow-size CDF: cannot open " + path};
  std::vector<std::pair<double, double>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    double size = 0, pct = 0;
    if (!(ls >> size)) continue;  // blank line
    if (!(ls >> pct))
      return Error{EINVAL, "flow-size CDF " + path + ": row without a CDF: " + line};
    rows.emplace_back(size, pct);
  }
  auto r = from_rows(std::move(rows));
  if (!r) return Error{r.error().code, path + ": " + r.error().message};
  return r;
}

std::string FlowSizeCdf::default_dir() {
  const char* env = std::getenv("SROCE_FLOW_CDF_DIR");
  if (env != nullptr && *env != '\0') return env;
  // The tables ship in userspace/sim/data/flow-size-cdf (README.md there): the source tree
  // this binary was built from, else the install prefix.
  struct stat st {};
  if (::stat(SROCE_FLOW_CDF_SOURCE_DIR, &st) == 0 && S_ISDIR(st.st_mode))
    return SROCE_FLOW_CDF_SOURCE_DIR;
  return SROCE_FLOW_CDF_INSTALL_DIR;
}

Result<FlowSizeCdf> FlowSizeCdf::named(const std::string& name, const std::string& dir) {
  const std::string d = dir.empty() ? default_dir() : dir;
  std::string file;
  if (name == "websearch")
    file = "WebSearch_distribution.txt";
  else if (name == "fbhdp")
    file = "FbHdp_distribution.txt";
  else if (name == "alistorage")
    file = "AliStorage2019.txt";
  else if (name == "googlerpc")
    file = "GoogleRPC2008.txt";
  else
    return Error{EINVAL, "unknown flow-size distribution '" + name +
                             "' (expected websearch, fbhdp, alistorage or googlerpc)"};
  return load(d + "/" + file);
}

uint64_t FlowSizeCdf::sample(Rng& rng) const {
  const double u = rng.real() * 100.0;
  size_t i = 1;
  while (i + 1 < rows_.size() && rows_[i].second <= u) ++i;
  const auto& [s0, c0] = rows_[i - 1];
  const auto& [s1, c1] = rows_[i];
  const double size = c1 > c0 ? s0 + (u - c0) / (c1 - c0) * (s1 - s0) : s1;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(size)));
}

double FlowSizeCdf::mean() const {
  double m = 0;
  for (size_t i = 1; i < rows_.size(); ++i)
    m +=
        (rows_[i].second - rows_[i - 1].second) / 100.0 * (rows_[i].first + rows_[i - 1].first) / 2;
  return m;
}

std::vector<FlowSpec> incast_flows(const std::vector<uint32_t>& srcs, uint32_t dst, uint64_t bytes,
                                   Time start) {
  std::vector<FlowSpec> out;
  for (uint32_t s : srcs)
    if (s != dst) out.push_back({s, dst, bytes, start});
  return out;
}

std::vector<FlowSpec> permutation_flows(uint32_t hosts, uint64_t bytes, Rng& rng, Time start) {
  std::vector<FlowSpec> out;
  if (hosts < 2) return out;
  // Sattolo's algorithm: a uniformly random single cycle, hence no fixed point.
  std::vector<uint32_t> p(hosts);
  for (uint32_t i = 0; i < hosts; ++i) p[i] = i;
  for (uint32_t i = hosts - 1; i > 0; --i) std::swap(p[i], p[rng.below(i)]);
  for (uint32_t i = 0; i < hosts; ++i) out.push_back({i, p[i], bytes, start});
  return out;
}

std::vector<FlowSpec> ring_flows(uint32_t hosts, uint64_t bytes, Time start) {
  std::vector<FlowSpec> out;
  if (hosts < 2) return out;
  for (uint32_t i = 0; i < hosts; ++i) out.push_back({i, (i + 1) % hosts, bytes, start});
  return out;
}

std::vector<FlowSpec> all_to_all_flows(uint32_t hosts, uint64_t bytes_per_src, double skew,
                                       Rng& rng, Time start) {
  std::vector<FlowSpec> out;
  if (hosts < 2) return out;
  std::vector<double> w(hosts, 1.0);
  if (skew > 0) {
    std::vector<uint32_t> rank(hosts);
    for (uint32_t i = 0; i < hosts; ++i) rank[i] = i;
    for (uint32_t i = hosts - 1; i > 0; --i) std::swap(rank[i], rank[rng.below(i + 1)]);
    for (uint32_t j = 0; j < hosts; ++j) w[j] = 1.0 / std::pow(1.0 + rank[j], skew);
  }
  for (uint32_t i = 0; i < hosts; ++i) {
    double sum = 0;
    for (uint32_t j = 0; j < hosts; ++j)
      if (j != i) sum += w[j];
    for (uint32_t k = 1; k < hosts; ++k) {
      const uint32_t j = (i + k) % hosts;
      const auto b =
          static_cast<uint64_t>(std::llround(static_cast<double>(bytes_per_src) * w[j] / sum));
      out.push_back({i, j, std::max<uint64_t>(b, 1), start});
    }
  }
  return out;
}

std::vector<FlowSpec> poisson_flows(uint32_t hosts, const FlowSizeCdf& cdf, double load,
                                    uint64_t link_bps, Duration duration, Rng& rng) {
  std::vector<FlowSpec> out;
  if (hosts < 2 || load <= 0 || link_bps == 0) return out;
  const double mean_gap_ps = cdf.mean() * 8.0 / (static_cast<double>(link_bps) * load) * 1e12;
  for (uint32_t h = 0; h < hosts; ++h) {
    double t = 0;
    for (;;) {
      // Exponential: -ln(1 - u) * mean; 1 - u is in (0, 1].
      t += -std::log(1.0 - rng.real()) * mean_gap_ps;
      if (t >= static_cast<double>(duration.ps)) break;
      uint32_t dst = static_cast<uint32_t>(rng.below(hosts - 1));
      if (dst >= h) ++dst;
      out.push_back({h, dst, cdf.sample(rng), Time{static_cast<int64_t>(t)}});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FlowSpec& a, const FlowSpec& b) { return a.start < b.start; });
  return out;
}

}  // namespace sroce::sim
