// ltp-train: trains LTP's policy (docs/cc/ltp.md, "Training") against the
// fluid bottleneck (userspace/cc/lab/ltp_fluid.h) in-process, by an
// evolution strategy (antithetic Gaussian perturbations, centred-rank
// fitness, Adam; Salimans et al. 2017), and writes the weights file the
// library compiles in (userspace/cc/ltp/weights/<variant>.txt).
//
//   ltp-train --variant full|noprobe|nofilter --seed S [--gens G --pop P --envs K]
//             [--lambda L] [--threads T] --out FILE
//   ltp-train ... --init FILE --packet-envs K [--packet-val N]
//             fine-tunes FILE's weights against packet-level incasts in the
//             simulator (packet_env.h) instead of the fluid model
//   ltp-train --variant V --seed S --gate --init FILE --packet-val N
//             evaluates FILE on N packet-level incasts drawn from seeds no
//             training run uses; exit 1 below the gate (--gate-util, -jain, -queue)
//
// Reproducible: the same arguments give the same file (threads only split
// the population; every evaluation has its own seeds).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ltp_fluid.h"
#include "packet_env.h"
#include "sroce/cc/ltp.h"

using namespace sroce::cc;

namespace {

constexpr int kP = LtpNet::kParams;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x7f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Args {
  std::string variant = "full";
  uint64_t seed = 1;
  int gens = 60, pop = 16, envs = 6, threads = 2, val_envs = 24;
  double sigma = 0.04, lr = 0.02, lambda = -1;
  double queue_weight = 1.0;
  std::string out, init;
  int packet_envs = 0, packet_val = 8;
  bool gate = false;
  double gate_util = 0.5, gate_jain = 0.8, gate_queue = 5;
};

double mean_reward(const LtpNet& net, LtpVariant v, const std::vector<lab::FluidEnv>& envs,
                   const lab::FluidWeights& w) {
  double s = 0;
  for (const auto& e : envs) s += lab::run_fluid(e, &net, v, w).reward;
  return s / static_cast<double>(envs.size());
}

double mean_packet_reward(const LtpNet& net, LtpVariant v, const std::vector<ltp_train::PacketEnv>& envs,
                          double lambda) {
  double s = 0;
  for (const auto& e : envs) s += ltp_train::run_packet_env(e, net, v, lambda).reward;
  return s / static_cast<double>(envs.size());
}

// The first line of a weights file ("# ltp-train ..."), for the provenance of a fine-tune.
std::string first_line(const std::string& text) {
  std::string l = text.substr(0, text.find('\n'));
  return l.rfind("# ", 0) == 0 ? l.substr(2) : l;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"ltp-train: LTP's policy by an evolution strategy on the fluid bottleneck"};
  app.add_option("--variant", a.variant, "full | noprobe | nofilter")->check(CLI::IsMember({"full", "noprobe", "nofilter"}));
  app.add_option("--seed", a.seed, "seed of the initial weights, perturbations and environments");
  app.add_option("--gens", a.gens, "generations")->check(CLI::Range(1, 100000));
  app.add_option("--pop", a.pop, "antithetic pairs per generation")->check(CLI::Range(1, 4096));
  app.add_option("--envs", a.envs, "environments per evaluation")->check(CLI::Range(1, 4096));
  app.add_option("--val-envs", a.val_envs, "validation environments (best weights kept)")->check(CLI::Range(1, 4096));
  app.add_option("--sigma", a.sigma, "perturbation std");
  app.add_option("--lr", a.lr, "Adam step");
  app.add_option("--queue-weight", a.queue_weight,
                 "fluid reward: weight of the queueing delay (per base RTT of queue; docs/cc/ltp.md \"Reward\")")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--lambda", a.lambda, "intrinsic reward weight (default for full: 0.5, fine-tune 0.1; 0 otherwise)");
  app.add_option("--threads", a.threads, "worker threads")->check(CLI::Range(1, 64));
  auto* out = app.add_option("--out", a.out, "weights file to write");
  app.add_flag("--gate", a.gate, "evaluate --init on held-out packet-level incasts and check the gate");
  app.add_option("--gate-util", a.gate_util, "gate: least mean utilisation");
  app.add_option("--gate-jain", a.gate_jain, "gate: least mean Jain index");
  app.add_option("--gate-queue", a.gate_queue, "gate: largest mean p99 queue, base RTTs");
  app.add_option("--init", a.init, "start from this weights file (instead of random weights)");
  app.add_option("--packet-envs", a.packet_envs, "packet-level incasts per evaluation (0: the fluid model)")
      ->check(CLI::Range(0, 256));
  app.add_option("--packet-val", a.packet_val, "packet-level validation incasts")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  if (!a.gate && out->count() == 0) {
    std::fprintf(stderr, "ltp-train: --out is required (unless --gate)\n");
    return 2;
  }
  if (a.gate && a.init.empty()) {
    std::fprintf(stderr, "ltp-train: --gate needs --init FILE\n");
    return 2;
  }
  const LtpVariant v = *parse_ltp_variant(a.variant);
  // The packet simulator's MIs gain 1-4 nats each (the fluid model's far
  // less): 0.1 there keeps the intrinsic term below the extrinsic one.
  if (a.lambda < 0) a.lambda = v == LtpVariant::kFull ? (a.packet_envs > 0 ? 0.1 : 0.5) : 0.0;
  const lab::FluidWeights fluid_w{a.lambda, a.queue_weight};
  const auto t0 = std::chrono::steady_clock::now();

  // Initial weights: N(0, 1/fan_in), biases 0, a small output layer.
  std::mt19937_64 g(mix(a.seed, 1));
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> th(kP, 0.0);
  {
    int k = 0;
    const int H = LtpNet::kHidden, I = LtpNet::kInputs;
    for (int i = 0; i < H * I; ++i) th[k++] = nd(g) / std::sqrt(I);
    k += H;
    for (int i = 0; i < H * H; ++i) th[k++] = nd(g) / std::sqrt(H);
    k += H;
    for (int i = 0; i < H; ++i) th[k++] = 0.1 * nd(g) / std::sqrt(H);
  }
  std::string init_header;
  if (!a.init.empty()) {
    std::ifstream in(a.init);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LtpNet n0;
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "ltp-train: cannot read %s\n", a.init.c_str());
      return 1;
    }
    if (auto e = parse_ltp_weights(text, n0)) {
      std::fprintf(stderr, "ltp-train: %s: %s\n", a.init.c_str(), e->c_str());
      return 1;
    }
    for (int i = 0; i < kP; ++i) th[i] = n0.w[i];
    init_header = first_line(text);
  }
  if (a.gate) {
    LtpNet n;
    for (int i = 0; i < kP; ++i) n.w[i] = static_cast<float>(th[i]);
    double util = 0, q = 0, jain = 0;
    for (int i = 0; i < a.packet_val; ++i) {
      const auto e = ltp_train::draw_packet_env(mix(a.seed, 4000000 + i));
      const auto r = ltp_train::run_packet_env(e, n, v, 0);
      std::fprintf(stderr, "gate %s: util %.3f qdelay_p99/rtt %.2f jain %.3f%s\n", e.describe().c_str(), r.util,
                   r.qdelay_rtt, r.jain, r.ok ? "" : " (incomplete)");
      util += r.util / a.packet_val;
      q += r.qdelay_rtt / a.packet_val;
      jain += r.jain / a.packet_val;
    }
    const bool pass = util >= a.gate_util && jain >= a.gate_jain && q <= a.gate_queue;
    std::printf("{\"bench\":\"ltp_packet_gate\",\"variant\":\"%s\",\"envs\":%d,\"util\":%.3f,"
                "\"qdelay_p99_rtts\":%.3f,\"jain\":%.3f,\"pass\":%s}\n",
                a.variant.c_str(), a.packet_val, util, q, jain, pass ? "true" : "false");
    return pass ? 0 : 1;
  }
  const bool packet = a.packet_envs > 0;
  std::vector<lab::FluidEnv> val;
  for (int i = 0; i < a.val_envs; ++i) val.push_back(lab::draw_fluid_env(mix(a.seed, 1000000 + i)));
  std::vector<ltp_train::PacketEnv> pval;
  for (int i = 0; packet && i < a.packet_val; ++i) pval.push_back(ltp_train::draw_packet_env(mix(a.seed, 2000000 + i)));
  const auto evaluate = [&](const LtpNet& n, int gen, int k_envs) {
    if (!packet) {
      std::vector<lab::FluidEnv> envs;
      for (int k = 0; k < k_envs; ++k) envs.push_back(lab::draw_fluid_env(mix(a.seed, 10000 + gen * 977 + k)));
      return mean_reward(n, v, envs, fluid_w);
    }
    std::vector<ltp_train::PacketEnv> envs;
    for (int k = 0; k < k_envs; ++k) envs.push_back(ltp_train::draw_packet_env(mix(a.seed, 3000000 + gen * 977 + k)));
    return mean_packet_reward(n, v, envs, a.lambda);
  };
  const auto validate = [&](const LtpNet& n) {
    return packet ? mean_packet_reward(n, v, pval, a.lambda) : mean_reward(n, v, val, fluid_w);
  };
  const auto to_net = [](const std::vector<double>& p) {
    LtpNet n;
    for (int i = 0; i < kP; ++i) n.w[i] = static_cast<float>(p[i]);
    return n;
  };
  std::vector<double> m(kP, 0), s2(kP, 0), best = th;
  double best_val = -1e300;
  if (!a.init.empty()) {  // a fine-tune keeps the initial weights unless validation improves on them
    best_val = validate(to_net(th));
    std::fprintf(stderr, "init val %.4f (%.0f s)\n", best_val,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const int P = a.pop;
  std::vector<std::vector<double>> eps(P, std::vector<double>(kP));
  std::vector<double> fit(2 * P);
  for (int gen = 0; gen < a.gens; ++gen) {
    const int k_envs = packet ? a.packet_envs : a.envs;
    for (int j = 0; j < P; ++j) {
      std::mt19937_64 ge(mix(mix(a.seed, gen), j + 7));
      for (int i = 0; i < kP; ++i) eps[j][i] = nd(ge);
    }
    const auto work = [&](int tid) {
      for (int idx = tid; idx < 2 * P; idx += a.threads) {
        const int j = idx / 2;
        const double sign = idx % 2 == 0 ? 1.0 : -1.0;
        std::vector<double> p(kP);
        for (int i = 0; i < kP; ++i) p[i] = th[i] + sign * a.sigma * eps[j][i];
        fit[idx] = evaluate(to_net(p), gen, k_envs);
      }
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < a.threads; ++t) ts.emplace_back(work, t);
    work(0);
    for (auto& t : ts) t.join();
    // Centred ranks in [-0.5, 0.5].
    std::vector<int> order(2 * P);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) { return fit[x] < fit[y] || (fit[x] == fit[y] && x < y); });
    std::vector<double> rank(2 * P);
    for (int r = 0; r < 2 * P; ++r) rank[order[r]] = static_cast<double>(r) / (2 * P - 1) - 0.5;
    for (int i = 0; i < kP; ++i) {
      double gr = 0;
      for (int j = 0; j < P; ++j) gr += (rank[2 * j] - rank[2 * j + 1]) * eps[j][i];
      gr /= (2.0 * P * a.sigma);
      // Adam ascent, with a little weight decay.
      gr -= 0.001 * th[i];
      m[i] = 0.9 * m[i] + 0.1 * gr;
      s2[i] = 0.999 * s2[i] + 0.001 * gr * gr;
      const double mh = m[i] / (1 - std::pow(0.9, gen + 1));
      const double vh = s2[i] / (1 - std::pow(0.999, gen + 1));
      th[i] += a.lr * mh / (std::sqrt(vh) + 1e-8);
    }
    if (gen % 5 == 4 || gen + 1 == a.gens) {
      const double vr = validate(to_net(th));
      if (vr > best_val) {
        best_val = vr;
        best = th;
      }
      const double mean_fit = std::accumulate(fit.begin(), fit.end(), 0.0) / (2 * P);
      std::fprintf(stderr, "gen %d fit %.4f val %.4f best %.4f (%.0f s)\n", gen + 1, mean_fit, vr, best_val,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Summary of the kept weights on the validation set.
  const LtpNet net = to_net(best);
  double util = 0, q = 0, err = 0, jain = 0;
  for (const auto& e : pval) {
    const auto r = ltp_train::run_packet_env(e, net, v, a.lambda);
    std::fprintf(stderr, "val %s: util %.3f qdelay_p99/rtt %.2f jain %.3f info_gain %.3f%s\n", e.describe().c_str(),
                 r.util, r.qdelay_rtt, r.jain, r.info_gain, r.ok ? "" : " (incomplete)");
    util += r.util;
    q += r.qdelay_rtt;
    jain += r.jain;
    err += r.info_gain;
  }
  for (const auto& e : packet ? std::vector<lab::FluidEnv>{} : val) {
    const auto r = lab::run_fluid(e, &net, v, fluid_w);
    util += r.util;
    q += r.qdelay_p99_us / e.rtt_us;
    err += r.est_err;
    jain += r.jain;
  }
  const double nv = static_cast<double>(packet ? pval.size() : val.size());
  char hdr[1024];
  if (packet)
    std::snprintf(hdr, sizeof hdr,
                  "ltp-train --variant %s --seed %llu --gens %d --pop %d --packet-envs %d --packet-val %d --sigma %g "
                  "--lr %g --lambda %g --init %s | packet val reward %.4f util %.3f qdelay_p99/rtt %.3f jain %.3f "
                  "info_gain %.3f | wall %.0f s | init: %s",
                  a.variant.c_str(), static_cast<unsigned long long>(a.seed), a.gens, a.pop, a.packet_envs,
                  a.packet_val, a.sigma, a.lr, a.lambda, a.init.c_str(), best_val, util / nv, q / nv, jain / nv,
                  err / nv, wall, init_header.c_str());
  else
    std::snprintf(hdr, sizeof hdr,
                  "ltp-train --variant %s --seed %llu --gens %d --pop %d --envs %d --val-envs %d --sigma %g "
                  "--lr %g --lambda %g --queue-weight %g%s%s | val reward %.4f util %.3f qdelay_p99/rtt %.3f jain %.3f est_err %.3f | "
                  "wall %.0f s",
                  a.variant.c_str(), static_cast<unsigned long long>(a.seed), a.gens, a.pop, a.envs, a.val_envs,
                  a.sigma, a.lr, a.lambda, a.queue_weight, a.init.empty() ? "" : " --init ", a.init.c_str(), best_val, util / nv,
                  q / nv, jain / nv, err / nv, wall);
  std::ofstream f(a.out);
  f << format_ltp_weights(net, hdr);
  if (!f) {
    std::fprintf(stderr, "ltp-train: cannot write %s\n", a.out.c_str());
    return 1;
  }
  std::printf("{\"variant\":\"%s\",\"seed\":%llu,\"val_reward\":%.4f,\"util\":%.3f,\"jain\":%.3f,\"%s\":%.3f,\"wall_s\":%.1f}\n",
              a.variant.c_str(), static_cast<unsigned long long>(a.seed), best_val, util / nv, jain / nv, packet ? "info_gain" : "est_err", err / nv, wall);
  return 0;
}
