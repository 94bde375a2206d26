// LTP's policy: a small MLP evaluated in plain C++ (docs/cc/ltp.md).
//
//   kInputs features -> tanh(kHidden) -> tanh(kHidden) -> tanh(1) = action a
//
// The action moves the rate multiplicatively once per monitor interval:
// rate *= exp(kStep * a). Weights are one flat float array (layer by layer,
// each layer's matrix row-major [out][in], then its bias), shared read-only by
// every flow; evaluation uses a fixed stack buffer: no allocation, no ML
// runtime.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sroce::cc {

// Which policy (and which inputs) a flow runs: the full LTP and the two
// ablations of issue 17.
enum class LtpVariant : uint8_t {
  kFull,      // filter features, trained with the intrinsic probing reward
  kNoProbe,   // filter features, trained without the intrinsic reward
  kNoFilter,  // raw signals only (no filter estimates), no intrinsic reward
};
const char* to_string(LtpVariant v);
std::optional<LtpVariant> parse_ltp_variant(std::string_view name);

struct LtpNet {
  static constexpr int kInputs = 8;
  static constexpr int kHidden = 32;
  static constexpr int kParams =
      kHidden * kInputs + kHidden + kHidden * kHidden + kHidden + kHidden + 1;
  static constexpr double kStep = 0.6;  // largest log-rate change per MI (x1.8)

  std::array<float, kParams> w{};

  // a in (-1, 1).
  double forward(const std::array<float, kInputs>& x) const;
};

// Weights as text: a header line starting with '#' (the command and seed
// that produced them), then "inputs hidden" and kParams numbers.
// Returns the error, or nothing on success.
std::optional<std::string> parse_ltp_weights(std::string_view text, LtpNet& out);
std::string format_ltp_weights(const LtpNet& net, std::string_view header);

// The weights compiled into the library (userspace/cc/ltp/weights/*.txt),
// parsed once at first use. Null if the shipped file did not parse (the
// controller then stays on its fallback); `error` says why.
const LtpNet* builtin_ltp_net(LtpVariant v, std::string* error = nullptr);
// The header line of the shipped file (command and seed).
std::string_view builtin_ltp_header(LtpVariant v);

}  // namespace sroce::cc
