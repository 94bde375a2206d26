// The fluid bottleneck of LTP's training (ltp_fluid.h).
#include "ltp_fluid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace sroce::cc::lab {

namespace {

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double u() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }
  double u(double a, double b) { return a + (b - a) * u(); }
  double logu(double a, double b) { return std::exp(u(std::log(a), std::log(b))); }
  double normal() {
    const double a = std::max(u(), 1e-300), b = u();
    return std::sqrt(-2 * std::log(a)) * std::cos(6.283185307179586 * b);
  }
};

double p99(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
}

double jain_of(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 1.0;
}

}  // namespace

std::string FluidEnv::describe() const {
  char b[256];
  int leaving = 0;
  for (int l : leave) leaving += l >= 0 ? 1 : 0;
  std::snprintf(b, sizeof b,
                "C %.0f G line %.0f G rtt %.1f us nominal %.2f flows %d stagger %d cross %.2f "
                "[%d,%d) buffer %.0f KB ecn_k %.0f KB loss %.1e burst %.2f leaving %d",
                cap_gbps, line_gbps, rtt_us, nominal, flows, stagger, cross, cross_on, cross_off,
                buffer_bytes / 1e3, ecn_k_bytes / 1e3, loss_p, burst_p, leaving);
  return b;
}

FluidEnv draw_fluid_env(uint64_t seed) {
  Rng r(seed);
  FluidEnv e;
  e.seed = seed;
  e.cap_gbps = r.logu(10, 400);
  e.line_gbps = r.u() < 0.7 ? e.cap_gbps : e.cap_gbps * r.u(1.5, 4);
  e.rtt_us = r.u() < 0.2 ? r.logu(1000, 50000) : r.logu(2, 200);
  e.nominal = r.logu(0.8, 1.25);
  e.flows = std::clamp(static_cast<int>(std::lround(r.logu(1, 64))), 1, 64);
  e.stagger = r.u() < 0.3 ? 0 : static_cast<int>(r.u(1, 6));
  e.stagger = std::min(e.stagger, 64 / e.flows);
  if (r.u() < 0.4) {
    e.cross = r.u(0.2, 0.6);
    e.cross_on = static_cast<int>(r.u(20, 80));
    e.cross_off = e.cross_on + static_cast<int>(r.u(30, 60));
  }
  const double bdp = e.cap_gbps * 1e9 / 8 * e.rtt_us * 1e-6;
  e.buffer_bytes = std::clamp(bdp * r.logu(0.3, 3), 64e3, 64e6);
  if (r.u() < 0.5) e.ecn_k_bytes = e.buffer_bytes * r.u(0.05, 0.2);
  e.loss_p = r.u() < 0.5 ? 0 : r.logu(1e-5, 1e-2);
  e.burst_p = r.u() < 0.3 ? 0.02 : 0;
  // Departures (drawn last, so the fields above are those of the first
  // round's distribution): in half the episodes with more than one flow,
  // every flow but the first stops at a step drawn over the episode (a
  // third of them not before its end), as the flows of an incast finish one
  // by one. Without them the only capacity ever freed was cross traffic
  // turning off, and the policy never learnt to take freed capacity
  // (docs/cc/ltp.md, "Issue 17, round 3").
  if (e.flows > 1 && r.u() < 0.5) {
    e.leave.assign(static_cast<size_t>(e.flows), -1);
    for (int i = 1; i < e.flows; ++i) {
      const int at = static_cast<int>(r.u(0.25, 1.5) * e.steps);
      if (at < e.steps) e.leave[static_cast<size_t>(i)] = std::max(at, i * e.stagger + 20);
    }
  }
  return e;
}

FluidResult run_fluid(const FluidEnv& env, const LtpNet* net, LtpVariant variant,
                      const FluidWeights& w) {
  Rng r(env.seed ^ 0x5eedf1a1dull);
  const double C = env.cap_gbps * 1e9 / 8;   // bytes/s
  const double L = env.line_gbps * 1e9 / 8;
  const double rtt = env.rtt_us * 1e-6;
  const double nominal_rtt = rtt * env.nominal;
  const int n = env.flows;
  LtpConfig cfg;
  cfg.variant = variant;
  cfg.filter.track_info_gain = true;
  std::vector<LtpCore> cores;
  cores.reserve(n);
  for (int i = 0; i < n; ++i) {
    cfg.seed = env.seed * 131 + static_cast<uint64_t>(i);
    cores.emplace_back(cfg, net);
  }
  std::vector<double> x(n, 1.0), tot(n, 0);
  std::vector<LtpObservation> pending(n);
  std::vector<char> has_pending(n, 0);
  std::vector<double> deliv(n), qsamples, jain_t, util_t;
  double q = 0;
  int burst_left = 0;
  const int last_start = (n - 1) * env.stagger;
  const auto alive = [&](int i, int t) {
    const int l = static_cast<size_t>(i) < env.leave.size() ? env.leave[static_cast<size_t>(i)] : -1;
    return t >= i * env.stagger && (l < 0 || t < l);
  };
  FluidResult res;
  double ext = 0, intr = 0, fsteps = 0, err = 0, err_n = 0;
  double util_num = 0, util_den = 0, sent_tot = 0, drop_tot = 0;
  for (int t = 0; t < env.steps; ++t) {
    const double dt = rtt + q / C;
    const bool cross_on = env.cross_on >= 0 && t >= env.cross_on && t < env.cross_off;
    const double cross = cross_on ? env.cross * C : 0;
    int active = 0;
    double A = cross;
    for (int i = 0; i < n; ++i)
      if (alive(i, t)) {
        ++active;
        A += x[i] * L;
      }
    const double q0 = q;
    double q1 = q + (A - C) * dt, drop = 0;
    if (q1 > env.buffer_bytes) {
      drop = q1 - env.buffer_bytes;
      q1 = env.buffer_bytes;
    }
    q1 = std::max(0.0, q1);
    const double served = std::max(0.0, A * dt - drop - (q1 - q0));
    q = q1;
    if (burst_left == 0 && env.burst_p > 0 && r.u() < env.burst_p) burst_left = 2;
    const double rloss = burst_left > 0 ? 0.3 : env.loss_p;
    if (burst_left > 0) --burst_left;
    const double qavg = (q0 + q1) / 2, qmin = std::min(q0, q1);
    const double fair = (C - cross) / active / L;
    double sum_deliv = 0, logfair = 0, gain = 0;
    for (int i = 0; i < n; ++i) {
      if (!alive(i, t)) continue;
      const double sent = x[i] * L * dt;
      const double share = A > 0 ? x[i] * L / A : 0;
      double d = share * served;
      const double lost = d * rloss;
      d -= lost;
      deliv[i] = d / dt / L;
      tot[i] += d;
      sum_deliv += d + lost;
      sent_tot += sent;
      drop_tot += share * drop;
      logfair += std::log(std::clamp(deliv[i] / fair, 0.05, 1.0));
      LtpObservation o;
      o.sent = x[i];
      o.delivered = deliv[i] * std::exp(0.05 * r.normal());
      o.rtt_min = (rtt + qmin / C) / nominal_rtt * (1 + 0.01 * std::fabs(r.normal()));
      o.rtt_mean = (rtt + qavg / C) / nominal_rtt * (1 + 0.01 * std::fabs(r.normal()));
      o.ecn = env.ecn_k_bytes > 0 && qavg > env.ecn_k_bytes
                  ? std::min(1.0, 0.05 + 0.2 * (qavg - env.ecn_k_bytes) / env.ecn_k_bytes)
                  : 0.0;
      o.loss = sent > 0 ? (share * drop + lost) / sent : 0;
      // The ACKs of an MI report what was sent one MI earlier (ltp.cc).
      if (has_pending[i]) {
        const double nx = cores[i].step(pending[i], x[i]);
        x[i] = nx < 0 ? std::max(x[i] * 0.5, 1.0 / 4096) : nx;
        gain += cores[i].filter().info_gain();
        if (t >= i * env.stagger + 10) {
          err += std::fabs(std::log2(cores[i].filter().rate_mean() / std::min(1.0, fair)));
          err_n += 1;
        }
      }
      pending[i] = o;
      has_pending[i] = 1;
    }
    const double u = std::min(1.0, sum_deliv / dt / (C - cross));
    const double qdelay = qavg / C;
    // Extrinsic reward: utilisation, proportional fairness, queueing delay
    // in base RTTs, buffer drops (docs/cc/ltp.md, "Reward").
    const double step_ext = u + 0.2 * logfair / active - w.queue * std::min(3.0, qdelay / rtt) -
                            3.0 * (A > 0 ? drop / (A * dt) : 0);
    ext += step_ext * active;
    intr += gain;
    fsteps += active;
    util_t.push_back(u);
    std::vector<double> on;
    for (int i = 0; i < n; ++i)
      if (alive(i, t)) on.push_back(deliv[i]);
    jain_t.push_back(jain_of(on));
    if (t >= env.steps / 2) {
      util_num += sum_deliv;
      util_den += (C - cross) * dt;
      qsamples.push_back(qdelay * 1e6);
    }
    if (t == env.steps * 3 / 4)
      for (int i = 0; i < n; ++i) tot[i] = 0;
  }
  res.extrinsic = ext / fsteps;
  res.intrinsic = intr / fsteps;
  res.reward = res.extrinsic + w.intrinsic * res.intrinsic;
  res.util = util_den > 0 ? util_num / util_den : 0;
  res.qdelay_p99_us = p99(qsamples);
  std::vector<double> stayed;  // Jain among the flows still running at the end
  for (int i = 0; i < n; ++i)
    if (alive(i, env.steps - 1)) stayed.push_back(tot[i]);
  res.jain = jain_of(stayed);
  res.loss = sent_tot > 0 ? drop_tot / sent_tot : 0;
  res.est_err = err_n > 0 ? err / err_n : 0;
  for (int t = env.steps - 1; t >= last_start; --t) {
    if (jain_t[t] < 0.9 || util_t[t] < 0.8) {
      res.converge_steps = t + 1 < env.steps ? t + 1 - last_start : -1;
      break;
    }
    if (t == last_start) res.converge_steps = 0;
  }
  return res;
}

}  // namespace sroce::cc::lab
