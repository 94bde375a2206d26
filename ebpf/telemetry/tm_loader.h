/* SPDX-License-Identifier: MIT */
/*
 * User-space side of the telemetry programs: load and pin them once, attach
 * them to interfaces (tc clsact, ingress + egress), detach, and read the
 * pinned maps. C, so that every user (sroce, sroced, pingmesh) shares it.
 *
 * All functions return 0 or a negative errno; on failure they write a
 * sentence saying what was wrong and what was expected into err[0..errlen).
 */
#ifndef SROCE_EBPF_TM_LOADER_H
#define SROCE_EBPF_TM_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "telemetry/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SROCE_TM_DEFAULT_PIN_DIR "/sys/fs/bpf/sroce/telemetry"
#define SROCE_TM_KERNEL_BTF "/sys/kernel/btf/vmlinux"

/* Our tc filters: a fixed handle and a late priority, so filters that
 * change traffic (ebpf/impair, lower priority numbers) run first and we see
 * what really goes to / comes from the wire. */
#define SROCE_TM_TC_HANDLE 0x5c0e
#define SROCE_TM_TC_PRIORITY 0xc5ce

struct sroce_tm_config {
	const char *pin_dir;  /* NULL: SROCE_TM_DEFAULT_PIN_DIR */
	const char *netns;    /* NULL: the current network namespace; else a
			       * name in /run/netns or a path to a netns file */
	const char *btf_path; /* NULL: none needed (the programs use no CO-RE);
			       * else passed to libbpf and must exist */
	uint32_t max_paths;   /* 0: SROCE_TM_DEFAULT_MAX_PATHS (first load only) */
	uint32_t max_pending; /* 0: SROCE_TM_DEFAULT_MAX_PENDING (first load only) */
};

enum sroce_tm_attach_result {
	SROCE_TM_ATTACHED = 0,
	SROCE_TM_ALREADY_ATTACHED = 1,
};
enum sroce_tm_detach_result {
	SROCE_TM_DETACHED = 0,
	SROCE_TM_NOT_ATTACHED = 1,
};

/* Load + pin (first time), then attach to ifname's clsact ingress and egress.
 * Returns enum sroce_tm_attach_result or a negative errno. */
int sroce_tm_attach(const char *ifname, const struct sroce_tm_config *cfg, char *err, size_t errlen);

/* Remove our filters from ifname; delete the clsact qdisc when no filter is
 * left on it; when no interface remains attached, unpin maps and programs.
 * Returns enum sroce_tm_detach_result or a negative errno. */
int sroce_tm_detach(const char *ifname, const struct sroce_tm_config *cfg, char *err, size_t errlen);

/* Detach from every interface recorded as attached (any netns still alive). */
int sroce_tm_detach_all(const struct sroce_tm_config *cfg, char *err, size_t errlen);

/* --- reading ----------------------------------------------------------- */

struct sroce_tm_maps {
	int paths;
	int pending;
	int stats;
	int attachments;
	uint32_t max_paths;
	uint32_t max_pending;
};

/* Open the pinned maps (fds -1 when closed). */
int sroce_tm_maps_open(const char *pin_dir, struct sroce_tm_maps *m, char *err, size_t errlen);
void sroce_tm_maps_close(struct sroce_tm_maps *m);

/* Sum a per-CPU stats map. */
int sroce_tm_read_stats(int stats_fd, uint64_t out[SROCE_TM_STAT_COUNT]);
const char *sroce_tm_stat_name(enum sroce_tm_stat s);

typedef int (*sroce_tm_path_fn)(const struct sroce_tm_path_key *k, const struct sroce_tm_path *v,
				void *arg);
/* Call fn for every path (stops early when fn returns non-zero). Returns the
 * number of paths visited or a negative errno. */
int sroce_tm_for_each_path(int paths_fd, sroce_tm_path_fn fn, void *arg);

typedef int (*sroce_tm_attach_fn)(const struct sroce_tm_attach_key *k, const struct sroce_tm_attach *v,
				  void *arg);
int sroce_tm_for_each_attachment(int attach_fd, sroce_tm_attach_fn fn, void *arg);

/* CLOCK_MONOTONIC in ns: the clock of first_ns / last_ns. */
uint64_t sroce_tm_now_ns(void);

/* --- tc plumbing (tm_tc.c) ---------------------------------------------- */

/* Number of tc filters on ifindex's clsact ingress or egress hook in the
 * current netns (0 also when there is no clsact qdisc), or a negative errno. */
int sroce_tm_tc_count_filters(int ifindex, bool ingress);
/* 1 when ifindex (current netns) has a clsact qdisc, 0 when not, or -errno. */
int sroce_tm_tc_has_clsact(int ifindex);

#ifdef __cplusplus
}
#endif

#endif /* SROCE_EBPF_TM_LOADER_H */
