// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Per-path RoCEv2 telemetry: tc clsact programs on ingress and egress.
 *
 * Every RoCEv2 packet (UDP destination port 4791, Annex A17.2) is counted on
 * its path (local, peer, UDP source port, BTH DestQP, direction): packets,
 * bytes, ECN CE marks, CNPs, ACKs and NAKs by AETH syndrome, PSN regressions
 * (retransmissions) and late arrivals, and the request -> ACK round-trip time.
 *
 * GSO/GRO: one skb may carry many RoCEv2 packets (UDP segmentation offload on
 * egress, UDP GRO on ingress): equal-sized UDP payloads of gso_size bytes,
 * each starting with its own BTH. The programs walk every segment's BTH
 * (bpf_loop), so counts and PSN tracking stay exact per packet.
 *
 * The programs only observe: they return TC_ACT_UNSPEC so that any filter
 * after them (e.g. ebpf/impair) still runs, and they never change the packet
 * except for bpf_skb_pull_data when the headers are not in the linear area.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "common/roce_bpf.h"
#include "telemetry/telemetry.h"

/* Settings, fixed before load (the verifier prunes what is off). */
const volatile uint16_t cfg_udp_port = SROCE_UDP_PORT;
const volatile uint8_t cfg_track_rtt = 1;

/* Sizes are defaults: the loader sets max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SROCE_TM_DEFAULT_MAX_PATHS);
	__type(key, struct sroce_tm_path_key);
	__type(value, struct sroce_tm_path);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SROCE_TM_DEFAULT_MAX_PENDING);
	__type(key, struct sroce_tm_pending_key);
	__type(value, struct sroce_tm_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, uint32_t);
	__type(value, struct sroce_tm_stats);
} stats SEC(".maps");

/* Written by user space only: where the programs are attached. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct sroce_tm_attach_key);
	__type(value, struct sroce_tm_attach);
} attachments SEC(".maps");

/* The value a new path starts from (too large for the 512-byte BPF stack). */
struct sroce_tm_path tm_zero_path = {};

/* One skb's worth of context, shared with the per-segment callback. */
struct tm_walk {
	struct __sk_buff *skb;
	struct sroce_tm_stats *st;    /* this CPU's statistics */
	struct sroce_tm_path_key key; /* dqpn filled per segment */
	uint64_t now;         /* coarse clock: last seen (precise time only for RTT) */
	uint32_t payload_off; /* first segment's BTH */
	uint32_t gso_size;    /* UDP payload bytes per segment (0: one segment) */
	uint32_t udp_total;   /* UDP payload bytes in the whole skb */
	uint32_t hdr_bytes;   /* frame bytes in front of each segment's payload */
	uint32_t segs;
	uint32_t counted;     /* segments counted so far */
	uint32_t first_err;   /* stat slot of the first segment's failure */
	uint8_t ce;
};

static __always_inline void stat_add(struct sroce_tm_stats *st, uint32_t slot, uint64_t n)
{
	if (slot < SROCE_TM_STAT_COUNT)
		st->v[slot] += n; /* this CPU's copy: no atomic needed */
}

static __always_inline uint32_t log2_u64(uint64_t v)
{
	uint32_t r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline struct sroce_tm_path *path_get(struct sroce_tm_stats *st,
						      const struct sroce_tm_path_key *k, uint64_t now)
{
	struct sroce_tm_path *v = bpf_map_lookup_elem(&paths, k);
	long err;

	if (v)
		return v;
	err = bpf_map_update_elem(&paths, k, &tm_zero_path, BPF_NOEXIST);
	if (err == 0)
		stat_add(st, SROCE_TM_STAT_PATH_INSERT, 1);
	else if (err != -17 /* EEXIST: another CPU inserted it first */) {
		stat_add(st, SROCE_TM_STAT_PATH_FULL, 1);
		return NULL;
	}
	v = bpf_map_lookup_elem(&paths, k);
	if (!v) {
		/* Evicted again at once: the map is too small for the traffic. */
		stat_add(st, SROCE_TM_STAT_PATH_FULL, 1);
		return NULL;
	}
	if (err == 0)
		v->first_ns = now;
	return v;
}

enum tm_psn_verdict { TM_PSN_NEW = 0, TM_PSN_RETX = 1, TM_PSN_LATE = 2 };

/*
 * Judge a PSN against what this path carried before (IBA 9.7.1 modular PSNs):
 *   ahead of the highest PSN           -> new (gaps are not judged: with
 *                                         multipath spraying a lane sees only
 *                                         some of a QP's PSNs)
 *   at or below it, carried before     -> retransmission (PSN regression)
 *   below it, never carried            -> late (out-of-order) arrival
 *   more than the window below         -> retransmission (go-back-N restarts)
 */
static __always_inline enum tm_psn_verdict psn_track(struct sroce_tm_path *v, uint32_t psn)
{
	int32_t d;
	uint32_t back;
	uint64_t bit;

	if (!v->psn_valid) {
		v->max_psn = psn;
		v->seen = 1;
		v->psn_valid = 1;
		return TM_PSN_NEW;
	}
	d = sroce_psn_diff(psn, v->max_psn);
	if (d > 0) {
		v->seen = d >= SROCE_TM_PSN_WINDOW ? 1 : (v->seen << d) | 1;
		v->max_psn = psn;
		return TM_PSN_NEW;
	}
	back = (uint32_t)-d;
	if (back >= SROCE_TM_PSN_WINDOW) {
		__sync_fetch_and_add(&v->retx, 1);
		return TM_PSN_RETX;
	}
	bit = 1ull << back;
	if (v->seen & bit) {
		__sync_fetch_and_add(&v->retx, 1);
		return TM_PSN_RETX;
	}
	v->seen |= bit;
	__sync_fetch_and_add(&v->ooo, 1);
	return TM_PSN_LATE;
}

static __always_inline void pending_key(struct sroce_tm_pending_key *pk, const struct tm_walk *w,
					uint32_t psn)
{
	__builtin_memcpy(pk->local, w->key.local, 16);
	__builtin_memcpy(pk->peer, w->key.peer, 16);
	pk->psn = psn;
}

/* Egress request with AckReq: remember when it left. */
static __always_inline void rtt_arm(const struct tm_walk *w, uint32_t psn)
{
	struct sroce_tm_pending_key pk = {};
	struct sroce_tm_pending pv = {};

	pending_key(&pk, w, psn);
	pv.path = w->key;
	pv.sent_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&pending, &pk, &pv, BPF_ANY))
		stat_add(w->st, SROCE_TM_STAT_PENDING_FULL, 1);
}

/* Egress retransmission of a request: an ACK could now answer either copy,
 * so its sample would be ambiguous (Karn's rule): forget the send time. */
static __always_inline void rtt_forget(const struct tm_walk *w, uint32_t psn)
{
	struct sroce_tm_pending_key pk = {};

	pending_key(&pk, w, psn);
	if (bpf_map_delete_elem(&pending, &pk) == 0)
		stat_add(w->st, SROCE_TM_STAT_RTT_KARN, 1);
}

/* Ingress ACK for `psn`: one RTT sample on the egress path of its request. */
static __always_inline void rtt_match(const struct tm_walk *w, uint32_t psn)
{
	struct sroce_tm_pending_key pk = {};
	struct sroce_tm_pending *pv;
	struct sroce_tm_path *ev;
	uint64_t now, rtt;
	uint32_t b;

	pending_key(&pk, w, psn);
	pv = bpf_map_lookup_elem(&pending, &pk);
	if (!pv) {
		stat_add(w->st, SROCE_TM_STAT_RTT_UNMATCHED, 1);
		return;
	}
	now = bpf_ktime_get_ns();
	rtt = now > pv->sent_ns ? now - pv->sent_ns : 0;
	ev = bpf_map_lookup_elem(&paths, &pv->path);
	if (ev) {
		b = log2_u64(rtt);
		if (b >= SROCE_TM_RTT_BUCKETS)
			b = SROCE_TM_RTT_BUCKETS - 1;
		__sync_fetch_and_add(&ev->rtt_hist[b], 1);
		__sync_fetch_and_add(&ev->rtt_sum_ns, rtt);
	}
	bpf_map_delete_elem(&pending, &pk);
	stat_add(w->st, SROCE_TM_STAT_RTT_SAMPLES, 1);
}

/*
 * Count one RoCEv2 packet whose BTH is at `off` and whose UDP payload is
 * `len` bytes. Returns 0 when counted, else the stat slot saying why not.
 */
static __noinline uint32_t tm_segment(struct tm_walk *w, uint32_t off, uint32_t len)
{
	uint64_t bw[2]; /* BTH + the next 4 bytes, 8-byte aligned */
	uint8_t *b = (uint8_t *)bw;
	struct sroce_tm_path *v;
	enum tm_psn_verdict verdict = TM_PSN_NEW;
	uint8_t opcode, syndrome;
	uint32_t psn;
	bool aeth;

	/* BTH + ICRC at least (Annex A17.3); b[] holds the BTH and the 4 bytes
	 * after it (the AETH when there is one). */
	if (len < SROCE_BTH_LEN + SROCE_ICRC_LEN)
		return SROCE_TM_STAT_TRUNC_BTH;
	{
		const uint8_t *data = (const uint8_t *)(long)w->skb->data;
		const uint8_t *end = (const uint8_t *)(long)w->skb->data_end;
		bool copied = false;

		/* Linear data (the common case): two loads instead of a helper call.
		 * The verifier tracks packet offsets only below 64 KiB. */
		if (off < 0x8000 && data + off + sizeof(bw) <= end) {
			const uint64_t *q = (const uint64_t *)(data + off);

			bw[0] = q[0];
			bw[1] = q[1];
			copied = true;
		}
		if (!copied && bpf_skb_load_bytes(w->skb, off, b, sizeof(bw)) < 0)
			return SROCE_TM_STAT_TRUNC_BTH;
	}
	opcode = b[0];
	if ((b[1] & 0x0f) != 0) /* TVer (IBA 9.2.1): only version 0 exists */
		return SROCE_TM_STAT_BAD_TVER;
	aeth = sroce_bpf_has_aeth(opcode);
	if (aeth && len < SROCE_BTH_LEN + SROCE_AETH_LEN + SROCE_ICRC_LEN)
		return SROCE_TM_STAT_TRUNC_BTH;
	psn = sroce_get_be24(b + 9);
	w->key.dqpn = sroce_get_be24(b + 5);

	v = path_get(w->st, &w->key, w->now);
	if (!v)
		return SROCE_TM_STAT_PATH_FULL;

	__sync_fetch_and_add(&v->packets, 1);
	__sync_fetch_and_add(&v->bytes, (uint64_t)w->hdr_bytes + len);
	if (w->ce)
		__sync_fetch_and_add(&v->ce, 1);
	if (opcode == SROCE_OP_CNP)
		__sync_fetch_and_add(&v->cnp, 1);
	v->last_ns = w->now;

	if (aeth) {
		syndrome = b[SROCE_BTH_LEN];
		switch (sroce_aeth_type(syndrome)) {
		case SROCE_AETH_ACK:
			__sync_fetch_and_add(&v->acks, 1);
			if (cfg_track_rtt && w->key.dir == SROCE_TM_INGRESS &&
			    (opcode == SROCE_OP_ACK || opcode == SROCE_OP_ATOMIC_ACK ||
			     opcode == SROCE_OP_READ_RESP_FIRST || opcode == SROCE_OP_READ_RESP_ONLY))
				rtt_match(w, psn);
			break;
		case SROCE_AETH_RNR_NAK:
			__sync_fetch_and_add(&v->nak[SROCE_TM_NAK_RNR], 1);
			break;
		case SROCE_AETH_NAK: {
			uint8_t code = sroce_aeth_value(syndrome);

			__sync_fetch_and_add(&v->nak[code <= SROCE_NAK_INVALID_RD_REQ ? code : SROCE_TM_NAK_OTHER], 1);
			break;
		}
		default:
			__sync_fetch_and_add(&v->nak[SROCE_TM_NAK_OTHER], 1);
			break;
		}
	}

	if (sroce_bpf_psn_sequenced(opcode))
		verdict = psn_track(v, psn);

	/* Requests leaving: time those with BTH AckReq (IBA 9.2), the requester
	 * asking for an ACK of this PSN; a retransmission voids the timing. */
	if (cfg_track_rtt && w->key.dir == SROCE_TM_EGRESS && sroce_bpf_is_rc(opcode) &&
	    !sroce_bpf_is_rc_response(opcode)) {
		if (verdict == TM_PSN_RETX)
			rtt_forget(w, psn);
		else if (b[8] & 0x80)
			rtt_arm(w, psn);
	}
	return 0;
}

/* bpf_loop callback for segment i of a GSO/GRO skb. */
static long tm_walk_segment(uint32_t i, void *ctx)
{
	struct tm_walk *w = ctx;
	uint32_t off, len, err;

	if (i >= w->segs)
		return 1;
	off = w->payload_off + i * w->gso_size;
	len = i + 1 < w->segs ? w->gso_size : w->udp_total - i * w->gso_size;
	err = tm_segment(w, off, len);
	if (err == 0) {
		w->counted++;
		return 0;
	}
	if (err == SROCE_TM_STAT_PATH_FULL)
		return 0; /* counted as map-full; the next segment may still fit */
	if (i == 0)
		w->first_err = err;
	else
		stat_add(w->st, SROCE_TM_STAT_SEG_TRUNC, w->segs - i);
	return 1;
}

static __always_inline uint32_t parse_result_stat(enum sroce_bpf_parse r)
{
	switch (r) {
	case SROCE_BPF_PARSE_NOT_IP: return SROCE_TM_STAT_NOT_IP;
	case SROCE_BPF_PARSE_NOT_UDP: return SROCE_TM_STAT_NOT_UDP;
	case SROCE_BPF_PARSE_RUNT: return SROCE_TM_STAT_RUNT;
	case SROCE_BPF_PARSE_TRUNC_IP: return SROCE_TM_STAT_TRUNC_IP;
	case SROCE_BPF_PARSE_TRUNC_UDP: return SROCE_TM_STAT_TRUNC_UDP;
	case SROCE_BPF_PARSE_IP_FRAG: return SROCE_TM_STAT_IP_FRAG;
	default: return SROCE_TM_STAT_IPV6_EXT;
	}
}

static __always_inline bool parse_truncated(enum sroce_bpf_parse r)
{
	return r == SROCE_BPF_PARSE_RUNT || r == SROCE_BPF_PARSE_TRUNC_IP ||
	       r == SROCE_BPF_PARSE_TRUNC_UDP;
}

/* Out of line: called twice (before and after a pull), verified once per call. */
static __noinline enum sroce_bpf_parse tm_parse(struct __sk_buff *skb, struct sroce_bpf_flow *f)
{
	return sroce_bpf_parse_udp(skb, f);
}

#define TM_PULL_LEN 256u /* enough for any header chain we walk in practice */

static __always_inline void tm_handle(struct __sk_buff *skb, uint8_t dir)
{
	struct sroce_bpf_flow f = {};
	struct tm_walk w = {};
	enum sroce_bpf_parse r;
	uint32_t len = skb->len;
	uint32_t segs, gso_size, zero = 0;
	struct sroce_tm_stats *st = bpf_map_lookup_elem(&stats, &zero);

	if (!st)
		return;
	stat_add(st, SROCE_TM_STAT_SKBS, 1);
	r = tm_parse(skb, &f);
	if (parse_truncated(r) && len > skb->data_end - skb->data) {
		/* Headers may sit in paged data; bring them into the linear area. */
		if (bpf_skb_pull_data(skb, len < TM_PULL_LEN ? len : TM_PULL_LEN) == 0)
			r = tm_parse(skb, &f);
		else
			stat_add(st, SROCE_TM_STAT_PULL_FAILED, 1);
	}
	if (r != SROCE_BPF_PARSE_UDP) {
		stat_add(st, parse_result_stat(r), 1);
		return;
	}
	if (f.dport != cfg_udp_port) {
		stat_add(st, SROCE_TM_STAT_NOT_ROCE, 1);
		return;
	}
	if (f.payload_off > len) {
		stat_add(st, SROCE_TM_STAT_TRUNC_UDP, 1);
		return;
	}

	w.skb = skb;
	w.st = st;
	/* Last-seen times need no precision, and the coarse clock is far cheaper. */
	w.now = bpf_ktime_get_coarse_ns();
	w.payload_off = f.payload_off;
	/* An accelerated VLAN tag is on the wire but not in the skb data. */
	w.hdr_bytes = f.payload_off + (skb->vlan_present ? 4 : 0);
	w.ce = f.ecn == 3;
	w.key.dir = dir;
	w.key.sport = f.sport;
	if (dir == SROCE_TM_EGRESS) {
		__builtin_memcpy(w.key.local, f.src, 16);
		__builtin_memcpy(w.key.peer, f.dst, 16);
	} else {
		__builtin_memcpy(w.key.local, f.dst, 16);
		__builtin_memcpy(w.key.peer, f.src, 16);
	}

	segs = skb->gso_segs;
	gso_size = skb->gso_size;
	if (gso_size == 0 || segs <= 1) {
		/* One datagram: its UDP length bounds the RoCEv2 packet (the frame
		 * may carry Ethernet padding after it). */
		if (f.udp_len < 8 || f.payload_off + (f.udp_len - 8u) > len) {
			stat_add(st, SROCE_TM_STAT_TRUNC_UDP, 1);
			return;
		}
		w.segs = 1;
		w.gso_size = 0;
		w.udp_total = f.udp_len - 8u;
		/* Ethernet padding is on the wire too: charge the whole frame. */
		w.hdr_bytes += len - f.payload_off - w.udp_total;
	} else {
		/* UDP GSO (egress) or UDP GRO (ingress): gso_size bytes of UDP
		 * payload per segment, the last one possibly shorter. The UDP
		 * length field describes one segment or nothing useful here. */
		uint32_t total = len - f.payload_off;

		if (segs > 0xffff || (uint64_t)(segs - 1) * gso_size >= total ||
		    (uint64_t)segs * gso_size < total) {
			stat_add(st, SROCE_TM_STAT_BAD_GSO, 1);
			return;
		}
		w.segs = segs;
		w.gso_size = gso_size;
		w.udp_total = total;
	}

	if (w.segs == 1) {
		uint32_t err = tm_segment(&w, w.payload_off, w.udp_total);

		if (err == 0)
			w.counted = 1;
		else if (err != SROCE_TM_STAT_PATH_FULL)
			w.first_err = err;
	} else {
		bpf_loop(w.segs, tm_walk_segment, &w, 0);
		stat_add(st, SROCE_TM_STAT_GSO_SKBS, 1);
	}

	if (w.first_err) {
		stat_add(st, w.first_err, 1);
		return;
	}
	stat_add(st, SROCE_TM_STAT_ROCE_SKBS, 1);
	stat_add(st, SROCE_TM_STAT_ROCE_PKTS, w.counted);
}

SEC("tc")
int sroce_tm_ingress(struct __sk_buff *skb)
{
	tm_handle(skb, SROCE_TM_INGRESS);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int sroce_tm_egress(struct __sk_buff *skb)
{
	tm_handle(skb, SROCE_TM_EGRESS);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
