#include "sroce/cc/cc.h"

namespace sroce::cc {

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kDcqcn: return "dcqcn";
    case Algorithm::kHpcc: return "hpcc";
    case Algorithm::kOdin: return "odin";
    case Algorithm::kDelay: return "delay";
    case Algorithm::kLtp: return "ltp";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (Algorithm a : {Algorithm::kDcqcn, Algorithm::kHpcc, Algorithm::kOdin, Algorithm::kDelay,
                      Algorithm::kLtp})
    if (name == to_string(a)) return a;
  return std::nullopt;
}

CongestionControl::CongestionControl(const CcConfig& cfg, const FlowParams& flow, NicState* nic)
    : impl_(make(cfg, flow, nic)) {}

CongestionControl::Impl CongestionControl::make(const CcConfig& cfg, const FlowParams& flow,
                                                NicState* nic) {
  switch (cfg.algorithm) {
    case Algorithm::kDcqcn: return Impl(std::in_place_type<Dcqcn>, cfg.dcqcn, flow);
    case Algorithm::kHpcc: return Impl(std::in_place_type<Hpcc>, cfg.hpcc, flow);
    case Algorithm::kOdin: return Impl(std::in_place_type<Odin>, cfg.odin, flow, nic);
    case Algorithm::kDelay: return Impl(std::in_place_type<Swift>, cfg.delay, flow);
    case Algorithm::kLtp: return Impl(std::in_place_type<Ltp>, cfg.ltp, flow);
  }
  return Impl(std::in_place_type<Hpcc>, cfg.hpcc, flow);
}

}  // namespace sroce::cc
