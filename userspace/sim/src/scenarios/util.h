// Shared pieces of the scenarios: capture setup and stats as JSON.
#pragma once

#include <memory>

#include "sroce/engine/engine.h"
#include "sroce/sim/host.h"
#include "sroce/sim/network.h"
#include "sroce/sim/pcap.h"
#include "sroce/sim/scenario.h"

namespace sroce::sim {

// Attaches a pcap writer to `net` when --pcap was given. Returns nullptr if
// not asked; reports and returns nullptr with *failed set if the file cannot
// be opened.
std::unique_ptr<PcapWriter> attach_pcap(Network& net, const ScenarioOptions& opt, Reporter& rep,
                                        bool* failed);

Json to_json(const LinkStats& s);
Json to_json(const EngineStats& s);
Json to_json(const HostStats& s);

// The path MTU enum for a size in bytes (IBA 9.7.5.1.5 sizes; anything else: 4096).
Mtu mtu_of(uint64_t bytes);

double to_us(Time t);
double to_us(Duration d);

// Sum of two engines' stats.
EngineStats operator+(const EngineStats& a, const EngineStats& b);

}  // namespace sroce::sim
