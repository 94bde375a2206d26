#include "mount_ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace sroce::run {
namespace {

constexpr const char* kCdevDir = "/dev/infiniband";  // libibverbs' RDMA_CDEV_DIR

std::string err_text(const std::string& what) { return what + ": " + strerror(errno); }

bool write_file(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// Without privilege: a user namespace in which we hold CAP_SYS_ADMIN over the new mount
// namespace, our own uid and gid mapped to themselves (the program runs as us).
std::string enter_user_namespace() {
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
    return err_text(
        "unshare(CLONE_NEWUSER|CLONE_NEWNS) (are unprivileged user namespaces "
        "allowed? see /proc/sys/user/max_user_namespaces)");
  write_file("/proc/self/setgroups", "deny");
  if (!write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n"))
    return err_text("writing /proc/self/uid_map");
  if (!write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n"))
    return err_text("writing /proc/self/gid_map");
  return "";
}

// Without privilege /dev/infiniband cannot be created in the real /dev: put a tmpfs over /dev
// in our namespace and bind every entry of the old /dev back into it.
std::string rebuild_dev(bool verbose) {
  int old = open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (old < 0) return err_text("open /dev");
  if (mount("sroce-run-dev", "/dev", "tmpfs", MS_NOSUID, "mode=0755") != 0) {
    close(old);
    return err_text("mount tmpfs on /dev");
  }
  DIR* d = fdopendir(dup(old));
  if (d == nullptr) {
    close(old);
    return err_text("fdopendir /dev");
  }
  std::string error;
  const std::string base = "/proc/self/fd/" + std::to_string(old) + "/";
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (fstatat(old, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string src = base + name;
    const std::string dst = "/dev/" + name;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlinkat(old, name.c_str(), target, sizeof(target) - 1);
      if (n < 0) continue;
      target[n] = '\0';
      if (symlink(target, dst.c_str()) != 0) error = err_text("symlink " + dst);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (mkdir(dst.c_str(), st.st_mode & 07777) != 0) error = err_text("mkdir " + dst);
      if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        error = err_text("bind " + dst);
      continue;
    }
    int fd = open(dst.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0 && verbose)
      fprintf(stderr, "sroce-run: note: could not bind %s: %s\n", dst.c_str(), strerror(errno));
  }
  closedir(d);
  close(old);
  if (mkdir(kCdevDir, 0755) != 0 && errno != EEXIST) error = err_text("mkdir /dev/infiniband");
  return error;
}

// The device node: /dev/full's numbers. libibverbs opens it, probes it with an ioctl
// (ENOTTY: no ioctl interface, so it falls back to write commands and sysfs, which is what
// the provider needs) and never writes to it for anything the provider implements.
std::string make_node(const std::string& path, dev_t* cdev) {
  struct stat full {};
  if (stat("/dev/full", &full) != 0 || !S_ISCHR(full.st_mode)) return err_text("stat /dev/full");
  *cdev = full.st_rdev;
  if (mknod(path.c_str(), S_IFCHR | 0666, full.st_rdev) == 0) {
    chmod(path.c_str(), 0666);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return "";
    }
    unlink(path.c_str());  // a nodev mount (user namespace): fall back to a bind mount
  }
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return err_text("create " + path);
  close(fd);
  if (mount("/dev/full", path.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return err_text("bind /dev/full on " + path);
  return "";
}

}  // namespace

NamespaceResult enter_namespace(const std::string& uverbs, bool verbose) {
  NamespaceResult r;
  bool userns = false;
  if (unshare(CLONE_NEWNS) != 0) {
    if (errno != EPERM) {
      r.error = err_text("unshare(CLONE_NEWNS)");
      return r;
    }
    r.error = enter_user_namespace();
    if (!r.error.empty()) return r;
    userns = true;
    if (verbose) fprintf(stderr, "sroce-run: unprivileged: using a user namespace\n");
  }
  // Nothing we mount may leak back to the parent namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    r.error = err_text("making / private");
    return r;
  }
  struct stat st {};
  if (stat(kCdevDir, &st) != 0) {
    if (!userns) {
      // As root: an empty directory in the real /dev (what the kernel's RDMA core would have
      // made); its contents stay private to this namespace.
      if (mkdir(kCdevDir, 0755) != 0 && errno != EEXIST) {
        r.error = err_text("mkdir /dev/infiniband");
        return r;
      }
    } else {
      r.error = rebuild_dev(verbose);
      if (!r.error.empty()) return r;
    }
  }
  if (mount("sroce-run", kCdevDir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") != 0) {
    r.error = err_text("mount tmpfs on /dev/infiniband");
    return r;
  }
  r.error = make_node(std::string(kCdevDir) + "/" + uverbs, &r.cdev);
  if (!r.error.empty()) return r;
  r.sysfs_root = std::string(kCdevDir) + "/.sysfs";
  if (mkdir(r.sysfs_root.c_str(), 0755) != 0) r.error = err_text("mkdir " + r.sysfs_root);
  if (verbose && r.error.empty())
    fprintf(stderr, "sroce-run: /dev/infiniband/%s is %u:%u, sysfs view at %s\n", uverbs.c_str(),
            major(r.cdev), minor(r.cdev), r.sysfs_root.c_str());
  return r;
}

}  // namespace sroce::run
