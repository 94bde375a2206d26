// The control channel of rdma_sroce.ko (/dev/sroce, docs/kmod.md): the
// kernel path of sroced.
//
// With the module loaded, programs use the kernel's uverbs device and the
// module mirrors every object to sroced over this channel: one message per
// read()/write(), each behind a struct sroce_kmsg (userspace/abi/sroce_abi.h).
// This class is only the I/O: open and attach, framed reads and writes, the
// doorbell eventfd the module signals, and the kernel's RoCE GID table
// (sgid_index in address vectors means the kernel's table on this path).
// What the messages mean is the service's (service_kernel.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sroce/engine/engine.h"
#include "sroce_abi.h"

namespace sroce::daemon {

class KernelChannel {
 public:
  ~KernelChannel();
  KernelChannel(const KernelChannel&) = delete;
  KernelChannel& operator=(const KernelChannel&) = delete;

  // Is the module's device `ibdev` there to serve (/dev/sroce exists and
  // /sys/class/infiniband/IBDEV is registered)?
  static bool available(const std::string& ibdev);
  // Opens SROCE_KDEV_PATH and attaches to `ibdev` with the limits `attr`.
  // Errors say what to do: EBUSY another daemon serves it, ENODEV no such
  // device, EPERM not CAP_NET_ADMIN, EPROTONOSUPPORT another module ABI.
  static Result<std::unique_ptr<KernelChannel>> attach(const std::string& ibdev,
                                                       const sroce_device_attr& attr);

  int fd() const { return fd_; }
  int doorbell_fd() const { return doorbell_; }
  const std::string& ibdev() const { return ibdev_; }

  // Reads one message into `buf` (at least SROCE_KMSG_MAX bytes). Returns
  // its length, 0 when the device is gone (EOF), -EAGAIN when none waits,
  // or another -errno.
  ssize_t read_message(std::span<std::byte> buf);
  // Writes {kind, ctx} + a + b as one message; 0 or -errno (ENOENT: the
  // object an event names is gone, which is not an error of ours).
  int write_message(uint32_t kind, uint32_t ctx, const void* a, size_t alen,
                    const void* b = nullptr, size_t blen = 0);
  // Empties the doorbell eventfd.
  void drain_doorbell();

  // The kernel's GID table, kept from SROCE_KMSG_GID messages.
  void on_gid(const sroce_kgid& g);
  std::optional<Gid> gid(uint32_t index) const;
  // The kernel index of `g`, if the table has it.
  std::optional<uint32_t> index_of(const Gid& g) const;
  size_t gid_count() const;

 private:
  KernelChannel() = default;

  int fd_ = -1;
  int doorbell_ = -1;
  std::string ibdev_;
  std::vector<std::optional<Gid>> gids_;
};

}  // namespace sroce::daemon
