// SPDX-License-Identifier: MIT
/* Reading the telemetry maps: pinned, or any fds of maps of the same layout. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "telemetry/tm_loader.h"

static const char *const kStatNames[SROCE_TM_STAT_COUNT] = {
	[SROCE_TM_STAT_SKBS] = "skbs",
	[SROCE_TM_STAT_ROCE_SKBS] = "roce_skbs",
	[SROCE_TM_STAT_NOT_IP] = "not_ip",
	[SROCE_TM_STAT_NOT_UDP] = "not_udp",
	[SROCE_TM_STAT_NOT_ROCE] = "not_roce",
	[SROCE_TM_STAT_RUNT] = "runt",
	[SROCE_TM_STAT_TRUNC_IP] = "trunc_ip",
	[SROCE_TM_STAT_TRUNC_UDP] = "trunc_udp",
	[SROCE_TM_STAT_TRUNC_BTH] = "trunc_bth",
	[SROCE_TM_STAT_BAD_TVER] = "bad_tver",
	[SROCE_TM_STAT_IP_FRAG] = "ip_frag",
	[SROCE_TM_STAT_IPV6_EXT] = "ipv6_ext",
	[SROCE_TM_STAT_BAD_GSO] = "bad_gso",
	[SROCE_TM_STAT_ROCE_PKTS] = "roce_pkts",
	[SROCE_TM_STAT_GSO_SKBS] = "gso_skbs",
	[SROCE_TM_STAT_SEG_TRUNC] = "seg_trunc",
	[SROCE_TM_STAT_PATH_INSERT] = "path_insert",
	[SROCE_TM_STAT_PATH_FULL] = "path_full",
	[SROCE_TM_STAT_PENDING_FULL] = "pending_full",
	[SROCE_TM_STAT_RTT_SAMPLES] = "rtt_samples",
	[SROCE_TM_STAT_RTT_UNMATCHED] = "rtt_unmatched",
	[SROCE_TM_STAT_RTT_KARN] = "rtt_karn",
	[SROCE_TM_STAT_PULL_FAILED] = "pull_failed",
};

const char *sroce_tm_stat_name(enum sroce_tm_stat s)
{
	return (unsigned)s < SROCE_TM_STAT_COUNT && kStatNames[s] ? kStatNames[s] : "unknown";
}

static uint32_t max_entries_of(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.max_entries;
}

void sroce_tm_maps_close(struct sroce_tm_maps *m)
{
	int *fds[] = {&m->paths, &m->pending, &m->stats, &m->attachments};

	for (size_t i = 0; i < 4; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

int sroce_tm_maps_open(const char *pin_dir, struct sroce_tm_maps *m, char *err, size_t errlen)
{
	const char *dir = pin_dir ? pin_dir : SROCE_TM_DEFAULT_PIN_DIR;
	struct {
		const char *name;
		int *fd;
	} want[] = {{SROCE_TM_PIN_PATHS, &m->paths},
		    {SROCE_TM_PIN_PENDING, &m->pending},
		    {SROCE_TM_PIN_STATS, &m->stats},
		    {SROCE_TM_PIN_ATTACH, &m->attachments}};

	m->paths = m->pending = m->stats = m->attachments = -1;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/%s", dir, want[i].name);
		*want[i].fd = bpf_obj_get(p);
		if (*want[i].fd < 0) {
			int e = errno;

			sroce_tm_maps_close(m);
			if (err && errlen)
				snprintf(err, errlen,
					 e == ENOENT ? "telemetry is not attached (no maps pinned in %s): run "
						       "'sroce telemetry attach IFACE' first"
						     : "cannot open %s: %s",
					 e == ENOENT ? dir : p, strerror(e));
			return -e;
		}
	}
	m->max_paths = max_entries_of(m->paths);
	m->max_pending = max_entries_of(m->pending);
	return 0;
}

int sroce_tm_read_stats(int stats_fd, uint64_t out[SROCE_TM_STAT_COUNT])
{
	int ncpu = libbpf_num_possible_cpus();
	struct sroce_tm_stats *vals;
	uint32_t key = 0;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	if (bpf_map_lookup_elem(stats_fd, &key, vals)) {
		int e = -errno;

		free(vals);
		return e;
	}
	for (uint32_t s = 0; s < SROCE_TM_STAT_COUNT; s++) {
		out[s] = 0;
		for (int c = 0; c < ncpu; c++)
			out[s] += vals[c].v[s];
	}
	free(vals);
	return 0;
}

int sroce_tm_for_each_path(int paths_fd, sroce_tm_path_fn fn, void *arg)
{
	struct sroce_tm_path_key cur, next;
	struct sroce_tm_path v;
	bool first = true;
	int n = 0;

	/* get_next_key from a key that was evicted meanwhile restarts from the
	 * first key (bpf(2)); cap the walk so that cannot loop for ever. */
	uint32_t cap = 2 * max_entries_of(paths_fd) + 16;

	while (bpf_map_get_next_key(paths_fd, first ? NULL : &cur, &next) == 0) {
		first = false;
		cur = next;
		if ((uint32_t)n >= cap)
			break;
		if (bpf_map_lookup_elem(paths_fd, &next, &v))
			continue; /* evicted between the two calls */
		n++;
		if (fn(&next, &v, arg))
			break;
	}
	return n;
}

int sroce_tm_for_each_attachment(int attach_fd, sroce_tm_attach_fn fn, void *arg)
{
	struct sroce_tm_attach_key cur, next;
	struct sroce_tm_attach v;
	bool first = true;
	int n = 0;

	while (bpf_map_get_next_key(attach_fd, first ? NULL : &cur, &next) == 0) {
		first = false;
		cur = next;
		if (bpf_map_lookup_elem(attach_fd, &next, &v))
			continue;
		n++;
		if (fn(&next, &v, arg))
			break;
	}
	return n;
}
