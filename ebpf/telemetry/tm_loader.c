// SPDX-License-Identifier: MIT
/*
 * Load, pin, attach and detach the telemetry programs.
 *
 * Lifetime: the first attach loads the programs and pins them with their maps
 * under the pin directory; later attaches (other interfaces, other network
 * namespaces) reuse the pinned programs, so every interface feeds the same
 * maps. A tc filter holds its program, so nothing needs a running process.
 * The last detach unpins everything.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>

#include "telemetry/tm_loader.h"
/* After the layout header: the skeleton names its struct types. */
#include "sroce_tm.skel.h"

static const char *const kPinnedMaps[] = {SROCE_TM_PIN_PATHS, SROCE_TM_PIN_PENDING, SROCE_TM_PIN_STATS,
					  SROCE_TM_PIN_ATTACH};

/*
 * libbpf reports through a print callback: keep its warnings (a verifier log
 * on a failed load is what one needs to see), but not the netlink notes it
 * prints for probes we expect to fail ("Exclusivity flag on" when the clsact
 * qdisc already exists, "Cannot find specified filter chain" when we are not
 * attached yet). SROCE_BPF_DEBUG=1 shows everything.
 */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static int debug = -1;

	if (debug < 0) {
		const char *e = getenv("SROCE_BPF_DEBUG");

		debug = e && *e && *e != '0';
	}
	if (!debug && (level == LIBBPF_DEBUG || strstr(fmt, "Kernel error message")))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void quiet_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

static const char *pin_dir_of(const struct sroce_tm_config *cfg)
{
	return cfg && cfg->pin_dir ? cfg->pin_dir : SROCE_TM_DEFAULT_PIN_DIR;
}

static void pin_path(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* --- network namespaces --------------------------------------------------- */

struct netns_guard {
	int saved; /* our netns, restored on leave; -1 when we did not move */
};

static int netns_path(const char *netns, char *out, size_t n)
{
	if (strchr(netns, '/'))
		return snprintf(out, n, "%s", netns) >= (int)n ? -ENAMETOOLONG : 0;
	return snprintf(out, n, "/run/netns/%s", netns) >= (int)n ? -ENAMETOOLONG : 0;
}

static int netns_enter_fd(struct netns_guard *g, int fd)
{
	g->saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (g->saved < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET) < 0) {
		int e = -errno;

		close(g->saved);
		g->saved = -1;
		return e;
	}
	return 0;
}

static int netns_enter(struct netns_guard *g, const char *netns, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int fd, ret;

	g->saved = -1;
	if (!netns || !*netns)
		return 0;
	if (netns_path(netns, path, sizeof(path)))
		return fail(err, errlen, -ENAMETOOLONG, "network namespace name '%s' is too long", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, -errno, "network namespace '%s' not found (%s: %s)", netns, path,
			    strerror(errno));
	ret = netns_enter_fd(g, fd);
	close(fd);
	if (ret)
		return fail(err, errlen, ret, "cannot enter network namespace '%s': %s", netns, strerror(-ret));
	return 0;
}

static void netns_leave(struct netns_guard *g)
{
	if (g->saved >= 0) {
		if (setns(g->saved, CLONE_NEWNET) < 0)
			perror("sroce: setns back to the original network namespace");
		close(g->saved);
		g->saved = -1;
	}
}

static uint64_t current_netns_ino(void)
{
	struct stat st;

	return stat("/proc/thread-self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Find and enter the namespace with inode `ino`: ours, or one named in /run/netns. */
static int netns_enter_ino(struct netns_guard *g, uint64_t ino)
{
	DIR *d;
	struct dirent *e;
	int ret = -ENOENT;

	g->saved = -1;
	if (current_netns_ino() == ino)
		return 0;
	d = opendir("/run/netns");
	if (!d)
		return -ENOENT;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/run/netns/%s", e->d_name);
		if (stat(path, &st) || (uint64_t)st.st_ino != ino)
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ret = netns_enter_fd(g, fd);
		close(fd);
		break;
	}
	closedir(d);
	return ret;
}

/* --- the BPF filesystem ---------------------------------------------------- */

static bool is_bpffs(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int ensure_pin_dir(const char *dir, char *err, size_t errlen)
{
	int ret;

	if (strncmp(dir, "/sys/fs/bpf/", 12) == 0 && !is_bpffs("/sys/fs/bpf")) {
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
			return fail(err, errlen, -errno,
				    "/sys/fs/bpf is not a BPF filesystem and mounting one failed: %s "
				    "(mount -t bpf bpf /sys/fs/bpf)", strerror(errno));
	}
	ret = mkdir_p(dir);
	if (ret)
		return fail(err, errlen, ret, "cannot create pin directory %s: %s", dir, strerror(-ret));
	if (!is_bpffs(dir))
		return fail(err, errlen, -EINVAL, "pin directory %s is not on a BPF filesystem (bpffs)", dir);
	return 0;
}

/* --- load and pin ---------------------------------------------------------- */

static int load_pinned(const char *dir, int *ing, int *egr)
{
	char p[PATH_MAX];

	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PROG_INGRESS);
	*ing = bpf_obj_get(p);
	if (*ing < 0)
		return -errno;
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PROG_EGRESS);
	*egr = bpf_obj_get(p);
	if (*egr < 0) {
		int e = -errno;

		close(*ing);
		*ing = -1;
		return e;
	}
	return 0;
}

static uint32_t map_max_entries(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.max_entries;
}

static int check_pinned_sizes(const char *dir, const struct sroce_tm_config *cfg, char *err, size_t errlen)
{
	struct {
		const char *name;
		uint32_t want;
		const char *opt;
	} m[] = {{SROCE_TM_PIN_PATHS, cfg ? cfg->max_paths : 0, "--max-paths"},
		 {SROCE_TM_PIN_PENDING, cfg ? cfg->max_pending : 0, "--max-pending"}};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		char p[PATH_MAX];
		uint32_t have;
		int fd;

		if (!m[i].want)
			continue;
		pin_path(p, sizeof(p), dir, m[i].name);
		fd = bpf_obj_get(p);
		if (fd < 0)
			continue;
		have = map_max_entries(fd);
		close(fd);
		if (have != m[i].want)
			return fail(err, errlen, -EEXIST,
				    "telemetry is already loaded with %s %u (asked for %u); run "
				    "'sroce telemetry detach --all' to reload with another size",
				    m[i].opt, have, m[i].want);
	}
	return 0;
}

static int load_and_pin(const char *dir, const struct sroce_tm_config *cfg, int *ing, int *egr, char *err,
			size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct sroce_tm *skel;
	char p[PATH_MAX];
	int ret;

	if (load_pinned(dir, ing, egr) == 0)
		return check_pinned_sizes(dir, cfg, err, errlen);

	if (cfg && cfg->btf_path) {
		if (access(cfg->btf_path, R_OK))
			return fail(err, errlen, -ENOENT,
				    "BTF file %s not found or unreadable (%s): give the kernel's BTF "
				    "(%s on kernels built with CONFIG_DEBUG_INFO_BTF=y)",
				    cfg->btf_path, strerror(errno), SROCE_TM_KERNEL_BTF);
		oo.btf_custom_path = cfg->btf_path;
	}
	/* bpf_loop (Linux 5.17) walks the segments of GSO/GRO skbs. */
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_loop, NULL) != 1)
		return fail(err, errlen, -EOPNOTSUPP,
			    "this kernel lacks the bpf_loop helper (needs Linux 5.17 or later), or BPF is "
			    "not permitted (run as root)");

	skel = sroce_tm__open_opts(&oo);
	if (!skel)
		return fail(err, errlen, -errno, "cannot open the telemetry BPF object: %s", strerror(errno));
	bpf_map__set_max_entries(skel->maps.paths,
				 cfg && cfg->max_paths ? cfg->max_paths : SROCE_TM_DEFAULT_MAX_PATHS);
	bpf_map__set_max_entries(skel->maps.pending,
				 cfg && cfg->max_pending ? cfg->max_pending : SROCE_TM_DEFAULT_MAX_PENDING);
	/* libbpf reuses maps already pinned there (if compatible) and pins new ones. */
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PATHS);
	bpf_map__set_pin_path(skel->maps.paths, p);
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PENDING);
	bpf_map__set_pin_path(skel->maps.pending, p);
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_STATS);
	bpf_map__set_pin_path(skel->maps.stats, p);
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_ATTACH);
	bpf_map__set_pin_path(skel->maps.attachments, p);

	ret = sroce_tm__load(skel);
	if (ret) {
		ret = ret < 0 ? ret : -EINVAL;
		fail(err, errlen, ret,
		     ret == -EPERM ? "loading the telemetry programs was refused: run as root (CAP_BPF, "
				     "CAP_NET_ADMIN)"
				   : "loading the telemetry programs failed: %s (stale pins in %s? try "
				     "'sroce telemetry detach --all')",
		     strerror(-ret), dir);
		goto out;
	}
	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PROG_INGRESS);
	ret = bpf_program__pin(skel->progs.sroce_tm_ingress, p);
	if (!ret) {
		pin_path(p, sizeof(p), dir, SROCE_TM_PIN_PROG_EGRESS);
		ret = bpf_program__pin(skel->progs.sroce_tm_egress, p);
	}
	if (ret) {
		fail(err, errlen, ret, "cannot pin %s: %s", p, strerror(-ret));
		goto out;
	}
	*ing = dup(bpf_program__fd(skel->progs.sroce_tm_ingress));
	*egr = dup(bpf_program__fd(skel->progs.sroce_tm_egress));
	ret = (*ing < 0 || *egr < 0) ? -EMFILE : 0;
out:
	sroce_tm__destroy(skel);
	return ret;
}

static void unpin_all(const char *dir)
{
	const char *const progs[] = {SROCE_TM_PIN_PROG_INGRESS, SROCE_TM_PIN_PROG_EGRESS};
	char p[PATH_MAX];

	for (size_t i = 0; i < 2; i++) {
		pin_path(p, sizeof(p), dir, progs[i]);
		unlink(p);
	}
	for (size_t i = 0; i < sizeof(kPinnedMaps) / sizeof(kPinnedMaps[0]); i++) {
		pin_path(p, sizeof(p), dir, kPinnedMaps[i]);
		unlink(p);
	}
	rmdir(dir);
}

static int open_attach_map(const char *dir)
{
	char p[PATH_MAX];

	pin_path(p, sizeof(p), dir, SROCE_TM_PIN_ATTACH);
	return bpf_obj_get(p);
}

static bool attach_map_empty(int fd)
{
	struct sroce_tm_attach_key k;

	return bpf_map_get_next_key(fd, NULL, &k) != 0;
}

/* --- attach / detach ------------------------------------------------------ */

static int tc_attach_one(int ifindex, enum bpf_tc_attach_point where, int prog_fd, bool *already)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, q, .handle = SROCE_TM_TC_HANDLE, .priority = SROCE_TM_TC_PRIORITY);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, o, .handle = SROCE_TM_TC_HANDLE, .priority = SROCE_TM_TC_PRIORITY,
			    .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE);
	struct bpf_prog_info info = {};
	uint32_t len = sizeof(info);

	if (bpf_tc_query(&hook, &q) == 0 && bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0 &&
	    q.prog_id == info.id) {
		*already = true;
		return 0;
	}
	*already = false;
	return bpf_tc_attach(&hook, &o);
}

int sroce_tm_attach(const char *ifname, const struct sroce_tm_config *cfg, char *err, size_t errlen)
{
	const char *dir = pin_dir_of(cfg);
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	struct netns_guard g;
	struct sroce_tm_attach_key k = {};
	struct sroce_tm_attach v = {};
	int ing = -1, egr = -1, afd = -1, ret, ifindex;
	bool created = false, a1 = false, a2 = false;

	quiet_libbpf();
	if (!ifname || !*ifname || strlen(ifname) >= IF_NAMESIZE)
		return fail(err, errlen, -EINVAL, "interface name '%s' is not valid (1 to %d characters)",
			    ifname ? ifname : "", IF_NAMESIZE - 1);
	ret = netns_enter(&g, cfg ? cfg->netns : NULL, err, errlen);
	if (ret)
		return ret;
	ifindex = (int)if_nametoindex(ifname);
	if (!ifindex) {
		ret = fail(err, errlen, -ENODEV, "interface '%s' not found%s%s", ifname,
			   cfg && cfg->netns ? " in network namespace " : "", cfg && cfg->netns ? cfg->netns : "");
		goto out;
	}
	ret = ensure_pin_dir(dir, err, errlen);
	if (ret)
		goto out;
	ret = load_and_pin(dir, cfg, &ing, &egr, err, errlen);
	if (ret)
		goto out;

	hook.ifindex = ifindex;
	ret = bpf_tc_hook_create(&hook);
	if (ret == 0)
		created = true;
	else if (ret != -EEXIST) {
		fail(err, errlen, ret, "cannot create the clsact qdisc on %s: %s", ifname, strerror(-ret));
		goto out;
	}
	ret = tc_attach_one(ifindex, BPF_TC_INGRESS, ing, &a1);
	if (!ret)
		ret = tc_attach_one(ifindex, BPF_TC_EGRESS, egr, &a2);
	if (ret) {
		fail(err, errlen, ret, "cannot attach the tc programs to %s: %s", ifname, strerror(-ret));
		goto out;
	}

	afd = open_attach_map(dir);
	k.netns_ino = current_netns_ino();
	k.ifindex = (uint32_t)ifindex;
	if (afd >= 0 && bpf_map_lookup_elem(afd, &k, &v) == 0) {
		/* Keep the record of who created the qdisc. */
	} else {
		memset(&v, 0, sizeof(v));
		snprintf(v.ifname, sizeof(v.ifname), "%s", ifname);
		v.attached_ns = sroce_tm_now_ns();
		v.created_clsact = created;
	}
	if (afd < 0 || bpf_map_update_elem(afd, &k, &v, BPF_ANY)) {
		ret = fail(err, errlen, -errno, "attached to %s, but cannot record it in %s/%s: %s", ifname, dir,
			   SROCE_TM_PIN_ATTACH, strerror(errno));
		goto out;
	}
	ret = a1 && a2 ? SROCE_TM_ALREADY_ATTACHED : SROCE_TM_ATTACHED;
out:
	if (ing >= 0)
		close(ing);
	if (egr >= 0)
		close(egr);
	if (afd >= 0)
		close(afd);
	netns_leave(&g);
	return ret;
}

/* Remove our filters from ifindex (current netns); drop the clsact qdisc when
 * it is left empty. Sets *had when one of our filters was there. */
static int tc_detach(int ifindex, bool *had)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, o, .handle = SROCE_TM_TC_HANDLE, .priority = SROCE_TM_TC_PRIORITY);
	enum bpf_tc_attach_point points[] = {BPF_TC_INGRESS, BPF_TC_EGRESS};
	int ni, ne, ret;

	*had = false;
	for (int i = 0; i < 2; i++) {
		hook.attach_point = points[i];
		ret = bpf_tc_detach(&hook, &o);
		if (ret == 0)
			*had = true;
		else if (ret != -ENOENT && ret != -EINVAL)
			return ret;
	}
	ni = sroce_tm_tc_count_filters(ifindex, true);
	ne = sroce_tm_tc_count_filters(ifindex, false);
	if (ni == 0 && ne == 0) {
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		ret = bpf_tc_hook_destroy(&hook);
		if (ret && ret != -ENOENT && ret != -EINVAL)
			return ret;
	}
	return 0;
}

static void finish_detach(const char *dir, int afd)
{
	if (afd >= 0 && attach_map_empty(afd))
		unpin_all(dir);
}

int sroce_tm_detach(const char *ifname, const struct sroce_tm_config *cfg, char *err, size_t errlen)
{
	const char *dir = pin_dir_of(cfg);
	struct netns_guard g;
	struct sroce_tm_attach_key k = {};
	int afd, ret, ifindex;
	bool had = false, recorded = false;

	quiet_libbpf();
	if (!ifname || !*ifname || strlen(ifname) >= IF_NAMESIZE)
		return fail(err, errlen, -EINVAL, "interface name '%s' is not valid", ifname ? ifname : "");
	ret = netns_enter(&g, cfg ? cfg->netns : NULL, err, errlen);
	if (ret)
		return ret;
	afd = open_attach_map(dir);
	k.netns_ino = current_netns_ino();
	ifindex = (int)if_nametoindex(ifname);
	if (!ifindex) {
		/* Gone with its qdisc; forget any record of it in this netns. */
		struct sroce_tm_attach_key cur, next;
		struct sroce_tm_attach v;
		bool first = true;

		while (afd >= 0 && bpf_map_get_next_key(afd, first ? NULL : &cur, &next) == 0) {
			first = false;
			cur = next;
			if (next.netns_ino == k.netns_ino && bpf_map_lookup_elem(afd, &next, &v) == 0 &&
			    strncmp(v.ifname, ifname, sizeof(v.ifname)) == 0)
				bpf_map_delete_elem(afd, &next);
		}
		ret = fail(err, errlen, -ENODEV, "interface '%s' not found%s%s", ifname,
			   cfg && cfg->netns ? " in network namespace " : "", cfg && cfg->netns ? cfg->netns : "");
		goto out;
	}
	k.ifindex = (uint32_t)ifindex;
	ret = tc_detach(ifindex, &had);
	if (ret) {
		fail(err, errlen, ret, "cannot detach the tc programs from %s: %s", ifname, strerror(-ret));
		goto out;
	}
	if (afd >= 0)
		recorded = bpf_map_delete_elem(afd, &k) == 0;
	ret = had || recorded ? SROCE_TM_DETACHED : SROCE_TM_NOT_ATTACHED;
out:
	finish_detach(dir, afd);
	if (afd >= 0)
		close(afd);
	netns_leave(&g);
	return ret;
}

int sroce_tm_detach_all(const struct sroce_tm_config *cfg, char *err, size_t errlen)
{
	const char *dir = pin_dir_of(cfg);
	struct sroce_tm_attach_key k;
	int afd, ret = 0;

	quiet_libbpf();
	afd = open_attach_map(dir);
	if (afd < 0) {
		unpin_all(dir); /* nothing recorded: clear whatever pins are left */
		return SROCE_TM_NOT_ATTACHED;
	}
	while (bpf_map_get_next_key(afd, NULL, &k) == 0) {
		struct netns_guard g;
		bool had;

		if (netns_enter_ino(&g, k.netns_ino) == 0) {
			int r = tc_detach((int)k.ifindex, &had);

			if (r && r != -ENODEV && !ret)
				ret = fail(err, errlen, r, "cannot detach from ifindex %u: %s", k.ifindex,
					   strerror(-r));
			netns_leave(&g);
		}
		bpf_map_delete_elem(afd, &k);
	}
	finish_detach(dir, afd);
	close(afd);
	return ret ? ret : SROCE_TM_DETACHED;
}

uint64_t sroce_tm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
