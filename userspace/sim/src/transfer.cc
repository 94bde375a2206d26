#include "sroce/sim/transfer.h"

#include <algorithm>
#include <cstdio>

namespace sroce::sim {

RcTransfer::RcTransfer(QpEnd client, QpEnd server, const TransferConfig& cfg)
    : client_(client), server_(server), cfg_(cfg) {
  if (cfg_.mix.empty()) cfg_.mix = {WrOpcode::kRdmaWrite};
  cfg_.msg_bytes = std::max<uint32_t>(cfg_.msg_bytes, 1);
  cfg_.window = std::max<uint32_t>(cfg_.window, 1);
  messages_ = (cfg_.total_bytes + cfg_.msg_bytes - 1) / cfg_.msg_bytes;
  for (uint64_t i = 0; i < messages_; ++i)
    if (op_of(i) == WrOpcode::kSend) ++sends_;
  completed_.assign(messages_, 0);
}

uint32_t RcTransfer::msg_len(uint64_t i) const {
  const uint64_t start = i * cfg_.msg_bytes;
  return static_cast<uint32_t>(std::min<uint64_t>(cfg_.msg_bytes, cfg_.total_bytes - start));
}

void RcTransfer::fill_pattern(std::span<std::byte> out, uint64_t offset) const {
  // Byte k of the stream is byte (k % 8) of mix(seed, k / 8): any slice can be
  // regenerated on its own.
  for (size_t i = 0; i < out.size();) {
    const uint64_t k = offset + i;
    const uint64_t w = Rng::mix(cfg_.pattern_seed * 0x9e3779b97f4a7c15ull ^ (k / 8));
    for (uint64_t b = k % 8; b < 8 && i < out.size(); ++b, ++i)
      out[i] = static_cast<std::byte>(w >> (8 * b));
  }
}

Result<void> RcTransfer::setup() {
  Host& c = *client_.host;
  Host& s = *server_.host;
  a_ = c.memory().alloc(cfg_.total_bytes, 4096);
  b_ = s.memory().alloc(cfg_.total_bytes, 4096);
  auto a = c.memory().at(a_, cfg_.total_bytes);
  auto b = s.memory().at(b_, cfg_.total_bytes);
  std::fill(a.begin(), a.end(), std::byte{0});
  std::fill(b.begin(), b.end(), std::byte{0});
  for (uint64_t i = 0; i < messages_; ++i) {
    const uint64_t off = i * cfg_.msg_bytes;
    auto& src = op_of(i) == WrOpcode::kRdmaRead ? b : a;
    fill_pattern(src.subspan(off, msg_len(i)), off);
  }
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
  auto ka = reg_region(c, client_.pd, a_, cfg_.total_bytes, acc);
  if (!ka) return ka.error();
  auto kb = reg_region(s, server_.pd, b_, cfg_.total_bytes, acc);
  if (!kb) return kb.error();
  a_keys_ = *ka;
  b_keys_ = *kb;

  c.on_completion([this](Host&, Handle, const Wc& wc, Time now) { on_client_wc(wc, now); });
  s.on_completion([this](Host&, Handle, const Wc& wc, Time now) { on_server_wc(wc, now); });
  // Receives for the SENDs, in message order, as deep as the RQ allows.
  for (uint32_t k = 0; k < 64; ++k) post_recv_next();
  return {};
}

void RcTransfer::start() {
  stats_.first_post = client_.host->sim().now();
  post_next();
}

void RcTransfer::post_recv_next() {
  while (next_recv_msg_ < messages_ && op_of(next_recv_msg_) != WrOpcode::kSend) ++next_recv_msg_;
  if (next_recv_msg_ >= messages_) return;
  const uint64_t i = next_recv_msg_++;
  const Sge sge{b_ + i * cfg_.msg_bytes, msg_len(i), b_keys_.lkey};
  RecvWr wr;
  wr.wr_id = i;
  wr.sgl = std::span<const Sge>(&sge, 1);
  if (int rc = server_.host->post_recv(server_.qpn, wr); rc != 0) {
    ++stats_.errors;
    if (stats_.first_error.empty()) stats_.first_error = "post_recv failed, errno " + std::to_string(rc);
  }
}

void RcTransfer::post_next() {
  while (outstanding_ < cfg_.window && next_post_ < messages_ && stats_.errors == 0) {
    const uint64_t i = next_post_;
    const uint64_t off = i * cfg_.msg_bytes;
    const Sge sge{a_ + off, msg_len(i), a_keys_.lkey};
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = op_of(i);
    wr.send_flags = kSendSignaled;
    wr.sgl = std::span<const Sge>(&sge, 1);
    wr.rdma.remote_addr = b_ + off;
    wr.rdma.rkey = b_keys_.rkey;
    const int rc = client_.host->post_send(client_.qpn, wr);
    if (rc != 0) {
      ++stats_.errors;
      if (stats_.first_error.empty())
        stats_.first_error = "post_send of message " + std::to_string(i) + " failed, errno " + std::to_string(rc);
      return;
    }
    ++next_post_;
    ++outstanding_;
    ++stats_.posted;
  }
}

void RcTransfer::on_client_wc(const Wc& wc, Time now) {
  const uint64_t i = wc.wr_id;
  if (i >= messages_) {
    ++stats_.errors;
    if (stats_.first_error.empty()) stats_.first_error = "completion with unknown wr_id " + std::to_string(i);
    return;
  }
  if (completed_[i]++) ++stats_.duplicates;
  if (i != next_complete_) ++stats_.out_of_order;
  next_complete_ = i + 1;
  if (outstanding_ > 0) --outstanding_;
  stats_.last_completion = now;
  if (wc.status != WcStatus::kSuccess) {
    ++stats_.errors;
    if (stats_.first_error.empty())
      stats_.first_error = "message " + std::to_string(i) + " completed with status " +
                           std::to_string(static_cast<int>(wc.status)) + " (" + to_string(wc.status) + ")";
  } else {
    ++stats_.completed;
    const WrOpcode op = op_of(i);
    ++stats_.by_op[op == WrOpcode::kRdmaWrite ? 0 : op == WrOpcode::kSend ? 1 : 2];
    stats_.bytes_done += msg_len(i);
  }
  if (on_progress) on_progress(*this, now);
  post_next();
}

void RcTransfer::on_server_wc(const Wc& wc, Time now) {
  stats_.last_completion = std::max(stats_.last_completion, now);
  const uint64_t i = wc.wr_id;
  // Receives complete in the order they were posted (IBA 10.8.3), which is
  // message order of the SENDs.
  while (next_recv_done_ < messages_ && op_of(next_recv_done_) != WrOpcode::kSend) ++next_recv_done_;
  if (i != next_recv_done_) ++stats_.out_of_order;
  next_recv_done_ = i + 1;
  if (wc.status != WcStatus::kSuccess || wc.opcode != WcOpcode::kRecv || i >= messages_ ||
      wc.byte_len != msg_len(i)) {
    ++stats_.errors;
    if (stats_.first_error.empty())
      stats_.first_error = "server receive " + std::to_string(i) + ": status " +
                           to_string(wc.status) + ", byte_len " + std::to_string(wc.byte_len);
  } else {
    ++stats_.recv_completed;
  }
  post_recv_next();
}

bool RcTransfer::verify(std::string* why) const {
  std::vector<std::byte> want(cfg_.msg_bytes);
  for (uint64_t i = 0; i < messages_; ++i) {
    const uint64_t off = i * cfg_.msg_bytes;
    const uint32_t len = msg_len(i);
    fill_pattern(std::span<std::byte>(want.data(), len), off);
    for (int side = 0; side < 2; ++side) {
      auto got = side == 0 ? client_.host->memory().at(a_ + off, len)
                           : server_.host->memory().at(b_ + off, len);
      if (std::equal(got.begin(), got.end(), want.begin())) continue;
      const auto mm = std::mismatch(got.begin(), got.end(), want.begin());
      if (why != nullptr) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s region differs at byte %llu (message %llu): got 0x%02x want 0x%02x",
                      side == 0 ? "client" : "server",
                      static_cast<unsigned long long>(off + (mm.first - got.begin())),
                      static_cast<unsigned long long>(i), static_cast<unsigned>(*mm.first),
                      static_cast<unsigned>(*mm.second));
        *why = buf;
      }
      return false;
    }
  }
  return true;
}

}  // namespace sroce::sim
