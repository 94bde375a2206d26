// /dev/sroce: open, attach, framed messages, the doorbell, the GID table.
#include "kernel_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sroce::daemon {

KernelChannel::~KernelChannel() {
  if (fd_ >= 0) close(fd_);
  if (doorbell_ >= 0) close(doorbell_);
}

bool KernelChannel::available(const std::string& ibdev) {
  struct stat st;
  if (stat(SROCE_KDEV_PATH, &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  std::string sys = "/sys/class/infiniband/" + ibdev;
  return stat(sys.c_str(), &st) == 0;
}

Result<std::unique_ptr<KernelChannel>> KernelChannel::attach(const std::string& ibdev,
                                                             const sroce_device_attr& attr) {
  std::unique_ptr<KernelChannel> k(new KernelChannel());
  k->ibdev_ = ibdev;
  if (ibdev.size() >= sizeof(sroce_kattach::ibdev))
    return Error{EINVAL, fmt::format("device name {} is too long", ibdev)};
  k->fd_ = open(SROCE_KDEV_PATH, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (k->fd_ < 0) {
    int e = errno;
    if (e == EPERM || e == EACCES)
      return Error{e, fmt::format("{}: {} (sroced needs CAP_NET_ADMIN for the kernel path)",
                                  SROCE_KDEV_PATH, strerror(e))};
    return Error{e, fmt::format("{}: {} (is rdma_sroce loaded? modprobe rdma_sroce)",
                                SROCE_KDEV_PATH, strerror(e))};
  }
  k->doorbell_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (k->doorbell_ < 0) return Error{errno, fmt::format("eventfd: {}", strerror(errno))};
  sroce_kattach a{};
  memcpy(a.ibdev, ibdev.data(), ibdev.size());
  a.abi_version = SROCE_KABI_VERSION;
  a.doorbell_fd = k->doorbell_;
  a.attr = attr;
  if (ioctl(k->fd_, SROCE_KIOC_ATTACH, &a) != 0) {
    int e = errno;
    const char* why = e == EBUSY ? "another sroced serves this device"
                      : e == ENODEV
                          ? "no such sroce device (rdma link add NAME type sroce netdev IFACE)"
                      : e == EPROTONOSUPPORT ? "the module speaks another kernel ABI version"
                                             : strerror(e);
    return Error{
        e, fmt::format(
               "{}: attach to {}: {} (limits: max_qp {}, max_qp_wr {}, max_sge {}, max_cqe {}, "
               "ports {}; doorbell fd {})",
               SROCE_KDEV_PATH, ibdev, why, a.attr.max_qp, a.attr.max_qp_wr, a.attr.max_sge,
               a.attr.max_cqe, a.attr.phys_port_cnt, a.doorbell_fd)};
  }
  return k;
}

ssize_t KernelChannel::read_message(std::span<std::byte> buf) {
  ssize_t n = read(fd_, buf.data(), buf.size());
  if (n < 0) return -errno;
  return n;
}

int KernelChannel::write_message(uint32_t kind, uint32_t ctx, const void* a, size_t alen,
                                 const void* b, size_t blen) {
  // One message per write(), in one buffer: the channel has no write_iter, so
  // writev() would hand the module each piece as a message of its own.
  alignas(8) std::byte buf[SROCE_KMSG_MAX];
  sroce_kmsg km{kind, ctx};
  if (sizeof km + alen + blen > sizeof buf) return -EMSGSIZE;
  memcpy(buf, &km, sizeof km);
  if (alen) memcpy(buf + sizeof km, a, alen);
  if (blen) memcpy(buf + sizeof km + alen, b, blen);
  ssize_t n = write(fd_, buf, sizeof km + alen + blen);
  if (n < 0) return -errno;
  return 0;
}

void KernelChannel::drain_doorbell() {
  uint64_t v;
  while (read(doorbell_, &v, sizeof v) == sizeof v) {
  }
}

void KernelChannel::on_gid(const sroce_kgid& g) {
  uint32_t i = g.entry.index;
  if (i >= 4096) return;  // larger than any GID table ib_core builds
  if (gids_.size() <= i) gids_.resize(i + 1);
  if (g.present) {
    Gid v;
    memcpy(v.raw, g.entry.gid, 16);
    gids_[i] = v;
  } else {
    gids_[i].reset();
  }
}

std::optional<Gid> KernelChannel::gid(uint32_t index) const {
  if (index >= gids_.size()) return std::nullopt;
  return gids_[index];
}

std::optional<uint32_t> KernelChannel::index_of(const Gid& g) const {
  for (size_t i = 0; i < gids_.size(); ++i)
    if (gids_[i] && memcmp(gids_[i]->raw, g.raw, 16) == 0) return static_cast<uint32_t>(i);
  return std::nullopt;
}

size_t KernelChannel::gid_count() const {
  size_t n = 0;
  for (const auto& g : gids_) n += g.has_value();
  return n;
}

}  // namespace sroce::daemon
