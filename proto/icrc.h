/* SPDX-License-Identifier: MIT */
/*
 * The RoCEv2 invariant CRC (IBA Annex A17.3.3): CRC-32 (the Ethernet
 * polynomial, reflected, init ~0, final ~) over
 *   8 bytes of 0xff (the pseudo LRH)
 *   + the IP header with its variant fields set to all ones
 *       IPv4: TOS, TTL, header checksum
 *       IPv6: traffic class, flow label, hop limit
 *   + the UDP header with its checksum set to all ones
 *   + the BTH with Resv8a (byte 4) set to all ones
 *   + the rest of the packet up to the ICRC.
 * The ICRC is appended in little-endian byte order (as Linux rxe and RNICs do).
 */
#ifndef SROCE_PROTO_ICRC_H
#define SROCE_PROTO_ICRC_H

#include "roce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Standard CRC-32 update (reflected 0xEDB88320) without pre/post inversion. */
uint32_t sroce_crc32_update(uint32_t crc, const uint8_t *p, size_t len);

/* The slicing-by-8 tables behind it (crc32_table.c, generated). */
extern const uint32_t sroce_crc32_table[8][256];

/*
 * Copy `len` bytes from `src` to `dst` (which must not overlap) and return
 * sroce_crc32_update(crc, src, len), in one pass over the bytes: PCLMULQDQ
 * folding (512-bit VPCLMULQDQ where the CPU has it) that stores what it
 * loads, slicing-by-8 elsewhere (crc32_fast.h).
 */
uint32_t sroce_crc32_copy(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len);

/*
 * Combination (crc32_combine.c, zlib's crc32_combine idea): with
 * c_a = sroce_crc32_update(c, A) and c_b = sroce_crc32_update(0, B),
 * sroce_crc32_combine(c_a, c_b, |B|) == sroce_crc32_update(c, A || B).
 * sroce_crc32_shift(c, n) is the register after n zero bytes, c * x^(8n)
 * mod P; sroce_crc32_mulmod multiplies two reflected residues mod P.
 * Cost: one 32-step multiplication per set bit of the length.
 */
uint32_t sroce_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
uint32_t sroce_crc32_shift(uint32_t crc, uint64_t len);
uint32_t sroce_crc32_mulmod(uint32_t a, uint32_t b);
/* x^(8 * 2^k) mod P, reflected, k = 0..31 (they repeat with period 32). */
extern const uint32_t sroce_crc32_x8pow[32];

/* The ICRC on the wire: little-endian, i.e. the CRC register's low byte first
 * (Linux rxe stores the u32 in CPU order on little-endian hosts; RNICs agree). */
static inline uint32_t sroce_icrc_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void sroce_icrc_put(uint8_t *p, uint32_t icrc)
{
	p[0] = (uint8_t)icrc;
	p[1] = (uint8_t)(icrc >> 8);
	p[2] = (uint8_t)(icrc >> 16);
	p[3] = (uint8_t)(icrc >> 24);
}

/*
 * ICRC of a whole IP packet: `ip` points to the IPv4 or IPv6 header, `len`
 * covers IP header .. end of RoCE payload, excluding the 4 ICRC bytes.
 * Returns 0 and sets *icrc, or -1 if the packet is not IP/UDP or too short.
 */
int sroce_icrc_ip(const uint8_t *ip, size_t len, uint32_t *icrc);

/*
 * ICRC of a UDP payload (BTH .. before ICRC) given the addressing, for the IP
 * and UDP headers sroce builds itself: IPv4 with identification 0, DF set, no
 * options; IPv6 with no extension headers. Addresses are 16-byte GIDs
 * (IPv4-mapped for IPv4).
 */
struct sroce_icrc_addr {
	uint8_t src_gid[16];
	uint8_t dst_gid[16];
	uint16_t src_port;
	uint16_t dst_port;
};
uint32_t sroce_icrc_payload(const struct sroce_icrc_addr *a, const uint8_t *payload, size_t len);
/* The same for an IPv4 header with identification `ip_id` (what a peer that
 * chooses its own ids sent; IPv6: ignored). */
uint32_t sroce_icrc_payload_id(const struct sroce_icrc_addr *a, uint16_t ip_id, const uint8_t *payload,
			       size_t len);
/*
 * sroce_icrc_payload(a, payload, len) without reading the data segment again:
 * payload[0 .. hdr_len) are the headers (BTH first, hdr_len >= SROCE_BTH_LEN),
 * payload[hdr_len .. hdr_len + data_len) is data whose CRC register
 * sroce_crc32_update(0, data, data_len) is `data_crc` (computed while the data
 * was copied in; those bytes are not read here), and the rest up to `len` (pad,
 * trailer) is read. The same value as sroce_icrc_payload, byte for byte.
 */
uint32_t sroce_icrc_payload_fused(const struct sroce_icrc_addr *a, const uint8_t *payload, size_t hdr_len,
				  uint32_t data_crc, size_t data_len, size_t len);

/*
 * Peers that choose their own IPv4 identification (Linux rxe, RNICs), seen by
 * a receiver that has only the UDP payload (icrc_id.c, docs/wire.md): the
 * ICRC with the true id is ICRC(id 0) ^ L_len(id), L_len linear and one to
 * one from 16 to 32 bits, so the syndrome ICRC_received ^ ICRC(id 0) is
 * either in L_len's image (the id is recovered exactly) or the packet is
 * corrupt. A solver is built per payload length (~30 us) and cached.
 */
struct sroce_icrc_id_solver {
	uint32_t basis[32]; /* echelon basis of the image, by highest set bit; 0 = none */
	uint16_t combo[32]; /* the id whose syndrome basis[j] is */
	uint32_t col[16];   /* L_len(1 << i): the syndrome of id bit i */
	uint32_t len;       /* payload length (BTH .. pad) it was built for */
	uint32_t valid;
};
void sroce_icrc_id_solver_init(struct sroce_icrc_id_solver *s, size_t len);
/* 0 and *ip_id if `syndrome` is the syndrome of an id, else -1. */
int sroce_icrc_id_solve(const struct sroce_icrc_id_solver *s, uint32_t syndrome, uint16_t *ip_id);
/* L_len(ip_id): ICRC(id ip_id) = ICRC(id 0) ^ this, for the solver's length. */
static inline uint32_t sroce_icrc_id_delta(const struct sroce_icrc_id_solver *s, uint16_t ip_id)
{
	uint32_t d = 0;
	for (int i = 0; ip_id; i++, ip_id >>= 1)
		if (ip_id & 1)
			d ^= s->col[i];
	return d;
}

#define SROCE_ICRC_ID_CACHE 16 /* solvers, direct-mapped by length / 4 */
struct sroce_icrc_id_cache {
	struct sroce_icrc_id_solver slot[SROCE_ICRC_ID_CACHE];
	uint64_t builds; /* solvers built (cache misses) */
};
/* The solver for payload length `len`, built on a miss. */
const struct sroce_icrc_id_solver *sroce_icrc_id_cache_get(struct sroce_icrc_id_cache *c, size_t len);

/*
 * The sender's side (docs/wire.md, "UDP GSO and the IPv4 identification"): a
 * RoCEv2 UDP payload sroce built for IPv4 identification 0 (`udp` .. `udp +
 * len`: an optional INT shim, BTH .. pad, ICRC) gets the ICRC it must carry
 * with identification `ip_id` instead, as the kernel numbers the segments of
 * one UDP GSO send 0, 1, 2, ... Returns 0, or -1 (nothing changed) if `len`
 * is too short or the INT shim does not parse.
 */
int sroce_icrc_set_ip_id(uint8_t *udp, size_t len, uint16_t ip_id, struct sroce_icrc_id_cache *c);

enum sroce_icrc_verdict {
	SROCE_ICRC_BAD = -1,
	SROCE_ICRC_OK = 0,             /* matched with the id given, or id 0 */
	SROCE_ICRC_OK_ID_RECOVERED = 1 /* matched with the id in *recovered */
};
/*
 * Verifies the ICRC `icrc` of `payload` (`len` bytes, BTH .. pad). `ip_id`:
 * the IPv4 identification when the datapath saw the header (checked
 * exactly, with that id only), or -1 when it did not (id 0 first, then
 * recovery through `cache`; NULL: no recovery). IPv6 addresses: the id plays
 * no part.
 */
int sroce_icrc_check(const struct sroce_icrc_addr *a, int32_t ip_id, const uint8_t *payload,
		     size_t len, uint32_t icrc, struct sroce_icrc_id_cache *cache, uint16_t *recovered);

/* Helpers to build the headers sroce sends (so the ICRC above matches).
 * Each returns the header length written (20 / 40 / 8). */
size_t sroce_build_ipv4(uint8_t *p, uint32_t src, uint32_t dst, uint8_t tos, uint8_t ttl,
			uint16_t payload_len /* UDP header + data */);
size_t sroce_build_ipv6(uint8_t *p, const uint8_t src[16], const uint8_t dst[16], uint8_t tclass,
			uint32_t flow_label, uint8_t hop_limit, uint16_t payload_len);
size_t sroce_build_udp(uint8_t *p, uint16_t sport, uint16_t dport, uint16_t len /* incl. header */);

/*
 * Fill in the UDP checksum of a complete IPv4 or IPv6 packet (`ip`, `len`
 * bytes including the ICRC), as RFC 768 / RFC 8200 8.1 define it. RoCEv2 over
 * IPv4 may send 0 (what sroce_build_udp writes); over IPv6 a zero UDP checksum
 * is illegal for general receivers (RFC 8200), so frames sroce writes itself
 * (pcap, raw datapaths) fill it. The UDP checksum is masked in the ICRC, so
 * this may run before or after the ICRC is appended. Returns 0, or -1 if the
 * packet is not IP/UDP or its lengths do not fit in `len`.
 */
int sroce_udp_fill_checksum(uint8_t *ip, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROTO_ICRC_H */
