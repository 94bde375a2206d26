// LTP's MLP and its weight files (sroce/cc/ltp_policy.h).
#include "sroce/cc/ltp_policy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sroce::cc {

// The shipped weight files, as text (generated from userspace/cc/ltp/weights
// by CMake: ltp_weights_data.cc).
extern const char* const kLtpWeightsFull;
extern const char* const kLtpWeightsNoProbe;
extern const char* const kLtpWeightsNoFilter;

const char* to_string(LtpVariant v) {
  switch (v) {
    case LtpVariant::kFull: return "full";
    case LtpVariant::kNoProbe: return "noprobe";
    case LtpVariant::kNoFilter: return "nofilter";
  }
  return "?";
}

std::optional<LtpVariant> parse_ltp_variant(std::string_view name) {
  for (LtpVariant v : {LtpVariant::kFull, LtpVariant::kNoProbe, LtpVariant::kNoFilter})
    if (name == to_string(v)) return v;
  return std::nullopt;
}

double LtpNet::forward(const std::array<float, kInputs>& x) const {
  std::array<float, kHidden> h1{}, h2{};
  const float* p = w.data();
  for (int o = 0; o < kHidden; ++o) {
    float s = p[kHidden * kInputs + o];
    for (int i = 0; i < kInputs; ++i) s += p[o * kInputs + i] * x[i];
    h1[o] = std::tanh(s);
  }
  p += kHidden * kInputs + kHidden;
  for (int o = 0; o < kHidden; ++o) {
    float s = p[kHidden * kHidden + o];
    for (int i = 0; i < kHidden; ++i) s += p[o * kHidden + i] * h1[i];
    h2[o] = std::tanh(s);
  }
  p += kHidden * kHidden + kHidden;
  float s = p[kHidden];
  for (int i = 0; i < kHidden; ++i) s += p[i] * h2[i];
  return std::tanh(s);
}

std::optional<std::string> parse_ltp_weights(std::string_view text, LtpNet& out) {
  std::string body;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line[0] != '#') {
      body.append(line);
      body.push_back(' ');
    }
    pos = end + 1;
  }
  const char* c = body.c_str();
  char* e = nullptr;
  const long ni = std::strtol(c, &e, 10);
  if (e == c) return "ltp weights: expected \"inputs hidden\" after the header, got no number";
  c = e;
  const long nh = std::strtol(c, &e, 10);
  if (e == c || ni != LtpNet::kInputs || nh != LtpNet::kHidden)
    return "ltp weights: expected shape " + std::to_string(LtpNet::kInputs) + " " +
           std::to_string(LtpNet::kHidden) + ", got " + std::to_string(ni) + " " + std::to_string(nh);
  c = e;
  for (int i = 0; i < LtpNet::kParams; ++i) {
    const float v = std::strtof(c, &e);
    if (e == c)
      return "ltp weights: expected " + std::to_string(LtpNet::kParams) + " numbers, got " +
             std::to_string(i);
    if (!std::isfinite(v)) return "ltp weights: number " + std::to_string(i) + " is not finite";
    out.w[i] = v;
    c = e;
  }
  while (*c == ' ' || *c == '\t' || *c == '\r') ++c;
  if (*c != '\0') return "ltp weights: more than " + std::to_string(LtpNet::kParams) + " numbers";
  return std::nullopt;
}

std::string format_ltp_weights(const LtpNet& net, std::string_view header) {
  std::string s = "# ";
  s.append(header);
  s += "\n" + std::to_string(LtpNet::kInputs) + " " + std::to_string(LtpNet::kHidden) + "\n";
  char buf[32];
  for (int i = 0; i < LtpNet::kParams; ++i) {
    std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(net.w[i]));
    s += buf;
    s += (i % 8 == 7 || i + 1 == LtpNet::kParams) ? '\n' : ' ';
  }
  return s;
}

namespace {
const char* text_of(LtpVariant v) {
  switch (v) {
    case LtpVariant::kFull: return kLtpWeightsFull;
    case LtpVariant::kNoProbe: return kLtpWeightsNoProbe;
    case LtpVariant::kNoFilter: return kLtpWeightsNoFilter;
  }
  return "";
}

struct Builtin {
  LtpNet net;
  std::optional<std::string> error;
  explicit Builtin(LtpVariant v) : error(parse_ltp_weights(text_of(v), net)) {}
};

const Builtin& builtin(LtpVariant v) {
  // Parsed once, at the first controller's construction (setup, not the
  // data path); thread-safe static initialisation.
  static const Builtin full(LtpVariant::kFull), noprobe(LtpVariant::kNoProbe),
      nofilter(LtpVariant::kNoFilter);
  return v == LtpVariant::kNoProbe ? noprobe : v == LtpVariant::kNoFilter ? nofilter : full;
}
}  // namespace

const LtpNet* builtin_ltp_net(LtpVariant v, std::string* error) {
  const Builtin& b = builtin(v);
  if (b.error) {
    if (error) *error = *b.error;
    return nullptr;
  }
  return &b.net;
}

std::string_view builtin_ltp_header(LtpVariant v) {
  const std::string_view t = text_of(v);
  if (t.empty() || t[0] != '#') return {};
  return t.substr(0, t.find('\n'));
}

}  // namespace sroce::cc
