/* SPDX-License-Identifier: MIT */
/*
 * CRC-32 and the RoCEv2 invariant CRC (IBA Vol 1 r1.4 Annex A17.3.3), and the
 * IP/UDP header builders whose output that ICRC assumes. Freestanding: small
 * explicit loops instead of memcpy/memset.
 */
#include "icrc.h"

#include "crc32_fast.h"

/* --- CRC-32 ----------------------------------------------------------------- */

static inline uint32_t load_le32(const uint8_t *p)
{
	/* Byte loads that the compiler merges into one 32-bit load on x86/arm64. */
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store_le32(uint8_t *p, uint32_t v)
{
	/* Byte stores that the compiler merges into one 32-bit store. */
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Slicing-by-8: the portable path, and the fast one below 64 bytes. */
uint32_t sroce_crc32_update_table(uint32_t crc, const uint8_t *p, size_t len)
{
	const uint32_t(*t)[256] = sroce_crc32_table;

	/* Eight bytes per step: table k holds the effect of a byte followed by k
	 * zero bytes, so the eight lookups of one step are independent. */
	while (len >= 8) {
		const uint32_t a = crc ^ load_le32(p);
		const uint32_t b = load_le32(p + 4);
		crc = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^
		      t[4][a >> 24] ^ t[3][b & 0xff] ^ t[2][(b >> 8) & 0xff] ^
		      t[1][(b >> 16) & 0xff] ^ t[0][b >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* The same, storing each 8 bytes it reads (byte stores the compiler merges). */
uint32_t sroce_crc32_copy_table(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len)
{
	const uint32_t(*t)[256] = sroce_crc32_table;

	while (len >= 8) {
		const uint32_t lo = load_le32(src), hi = load_le32(src + 4);
		/* From the loaded words, not src again: dst may alias anything, so
		 * re-reading src after each store would reload it byte by byte. */
		store_le32(dst, lo);
		store_le32(dst + 4, hi);
		const uint32_t a = crc ^ lo;
		crc = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^
		      t[4][a >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
		      t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
		src += 8;
		dst += 8;
		len -= 8;
	}
	while (len--) {
		const uint8_t b = *src++;
		*dst++ = b;
		crc = t[0][(crc ^ b) & 0xff] ^ (crc >> 8);
	}
	return crc;
}

/*
 * PCLMULQDQ folding (crc32_fast.c) where the build and the CPU have it, from
 * 64 bytes up: 6-7x the tables on 1-64 KiB (bench_crc32); from 256 bytes the
 * 512-bit VPCLMULQDQ path where the CPU has that, else the 256-bit one where
 * it has VPCLMULQDQ with AVX2 only. From 16 to 63 bytes (the ICRC's pseudo
 * header is 40-60) one register folds; the tables take what is shorter.
 */
uint32_t sroce_crc32_update(uint32_t crc, const uint8_t *p, size_t len)
{
#if SROCE_CRC32_HAVE_PCLMUL
	if (len >= SROCE_CRC32_WIDE_MIN && sroce_crc32_vpclmul_supported())
		return sroce_crc32_update_vpclmul(crc, p, len);
	if (len >= SROCE_CRC32_YMM_MIN && sroce_crc32_vpclmul256_supported())
		return sroce_crc32_update_vpclmul256(crc, p, len);
	if (len >= SROCE_CRC32_SHORT_MIN && sroce_crc32_pclmul_supported())
		return sroce_crc32_update_pclmul(crc, p, len);
#endif
	return sroce_crc32_update_table(crc, p, len);
}

uint32_t sroce_crc32_copy(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len)
{
#if SROCE_CRC32_HAVE_PCLMUL
	if (len >= SROCE_CRC32_WIDE_MIN && sroce_crc32_vpclmul_supported())
		return sroce_crc32_copy_vpclmul(crc, dst, src, len);
	if (len >= SROCE_CRC32_YMM_MIN && sroce_crc32_vpclmul256_supported())
		return sroce_crc32_copy_vpclmul256(crc, dst, src, len);
	if (len >= SROCE_CRC32_SHORT_MIN && sroce_crc32_pclmul_supported())
		return sroce_crc32_copy_pclmul(crc, dst, src, len);
#endif
	return sroce_crc32_copy_table(crc, dst, src, len);
}

/* --- ICRC (Annex A17.3.3) ---------------------------------------------------- */

/*
 * The CRC register after the initial ~0 and the 8 bytes of 0xff that stand in
 * for the InfiniBand LRH, which RoCEv2 does not carry (A17.3.3). The unit
 * test recomputes it.
 */
#define ICRC_LRH_SEED 0xdebb20e3u

/* Pseudo header: IPv6 (40) is the longest IP header sroce accepts with
 * options-free IPv4 (20); IPv4 options (up to 40 more) are covered as is. */
#define PSEUDO_MAX (60 + 8 + SROCE_BTH_LEN)

static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

static void fill_bytes(uint8_t *dst, uint8_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = v;
}

/* Mask the UDP checksum and BTH Resv8a in a pseudo header whose UDP header
 * starts at `udp` and is followed by `bth_len` (<= 12) bytes of BTH. */
static void mask_udp_bth(uint8_t *udp, size_t bth_len)
{
	fill_bytes(udp + 6, 0xff, 2); /* UDP checksum */
	if (bth_len > 4)
		udp[8 + 4] = 0xff; /* BTH Resv8a (FECN/BECN in IB) */
}

int sroce_icrc_ip(const uint8_t *ip, size_t len, uint32_t *icrc)
{
	uint8_t ph[PSEUDO_MAX];
	size_t ip_len;

	if (len < 1)
		return -1;
	switch (ip[0] >> 4) {
	case 4:
		ip_len = (size_t)(ip[0] & 0xf) * 4;
		if (ip_len < 20 || len < ip_len + 8 + SROCE_BTH_LEN || ip[9] != 17)
			return -1;
		copy_bytes(ph, ip, ip_len + 8 + SROCE_BTH_LEN);
		ph[1] = 0xff;              /* TOS: DSCP and ECN change in flight */
		ph[8] = 0xff;              /* TTL */
		fill_bytes(ph + 10, 0xff, 2); /* header checksum follows TTL */
		break;
	case 6:
		ip_len = 40;
		/* No extension headers: Next Header must be UDP. */
		if (len < ip_len + 8 + SROCE_BTH_LEN || ip[6] != 17)
			return -1;
		copy_bytes(ph, ip, ip_len + 8 + SROCE_BTH_LEN);
		ph[0] |= 0x0f;              /* traffic class, high nibble */
		fill_bytes(ph + 1, 0xff, 3); /* traffic class low nibble, flow label */
		ph[7] = 0xff;               /* hop limit */
		break;
	default:
		return -1;
	}
	mask_udp_bth(ph + ip_len, SROCE_BTH_LEN);

	const size_t ph_len = ip_len + 8 + SROCE_BTH_LEN;
	uint32_t crc = sroce_crc32_update(ICRC_LRH_SEED, ph, ph_len);
	crc = sroce_crc32_update(crc, ip + ph_len, len - ph_len);
	*icrc = ~crc;
	return 0;
}

static bool gid_is_v4_mapped(const uint8_t gid[16])
{
	for (int i = 0; i < 10; i++)
		if (gid[i] != 0)
			return false;
	return gid[10] == 0xff && gid[11] == 0xff;
}

uint32_t sroce_icrc_payload(const struct sroce_icrc_addr *a, const uint8_t *payload, size_t len)
{
	return sroce_icrc_payload_id(a, 0, payload, len);
}

/*
 * The CRC register after the pseudo header sroce's own IP and UDP headers give
 * (IPv4 id `ip_id`, DF, masked fields; or IPv6) and the first bytes of the
 * BTH (up to SROCE_BTH_LEN of `payload`, Resv8a masked); *bth_len says how
 * many. `len` is the UDP payload's length without the ICRC.
 */
static uint32_t icrc_pseudo(const struct sroce_icrc_addr *a, uint16_t ip_id, const uint8_t *payload,
			    size_t len, size_t *bth_len_out)
{
	uint8_t ph[40 + 8 + SROCE_BTH_LEN];
	const uint16_t udp_len = (uint16_t)(8 + len + SROCE_ICRC_LEN);
	size_t ip_len;

	if (gid_is_v4_mapped(a->src_gid) && gid_is_v4_mapped(a->dst_gid)) {
		/* What sroce_build_ipv4 writes, with TOS, TTL, checksum masked. */
		ip_len = 20;
		ph[0] = 0x45;
		ph[1] = 0xff;
		sroce_put_be16(ph + 2, (uint16_t)(20 + udp_len));
		sroce_put_be16(ph + 4, ip_id);  /* sroce sends 0 (docs/wire.md) */
		sroce_put_be16(ph + 6, 0x4000); /* DF, fragment offset 0 */
		ph[8] = 0xff;
		ph[9] = 17;
		fill_bytes(ph + 10, 0xff, 2);
		copy_bytes(ph + 12, a->src_gid + 12, 4);
		copy_bytes(ph + 16, a->dst_gid + 12, 4);
	} else {
		ip_len = 40;
		fill_bytes(ph, 0xff, 4); /* version 6 nibble restored below */
		ph[0] = 0x6f;
		sroce_put_be16(ph + 4, udp_len);
		ph[6] = 17;
		ph[7] = 0xff;
		copy_bytes(ph + 8, a->src_gid, 16);
		copy_bytes(ph + 24, a->dst_gid, 16);
	}
	uint8_t *udp = ph + ip_len;
	sroce_put_be16(udp, a->src_port);
	sroce_put_be16(udp + 2, a->dst_port);
	sroce_put_be16(udp + 4, udp_len);
	const size_t bth_len = len < SROCE_BTH_LEN ? len : SROCE_BTH_LEN;
	copy_bytes(udp + 8, payload, bth_len);
	mask_udp_bth(udp, bth_len);
	*bth_len_out = bth_len;
	return sroce_crc32_update(ICRC_LRH_SEED, ph, ip_len + 8 + bth_len);
}

uint32_t sroce_icrc_payload_id(const struct sroce_icrc_addr *a, uint16_t ip_id, const uint8_t *payload,
			       size_t len)
{
	size_t bth_len;
	uint32_t crc = icrc_pseudo(a, ip_id, payload, len, &bth_len);
	crc = sroce_crc32_update(crc, payload + bth_len, len - bth_len);
	return ~crc;
}

uint32_t sroce_icrc_payload_fused(const struct sroce_icrc_addr *a, const uint8_t *payload, size_t hdr_len,
				  uint32_t data_crc, size_t data_len, size_t len)
{
	size_t bth_len;
	uint32_t crc = icrc_pseudo(a, 0, payload, len, &bth_len);
	/* The headers after the BTH, then the data by combination, then the tail:
	 * update(c, H || D || T) = update(combine(update(c, H), update(0, D), |D|), T). */
	crc = sroce_crc32_update(crc, payload + bth_len, hdr_len - bth_len);
	crc = sroce_crc32_combine(crc, data_crc, data_len);
	crc = sroce_crc32_update(crc, payload + hdr_len + data_len, len - hdr_len - data_len);
	return ~crc;
}

/* --- header builders ---------------------------------------------------------- */

/* One's-complement sum of big-endian 16-bit words (RFC 1071), not folded. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	while (len >= 2) {
		sum += sroce_get_be16(p);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

size_t sroce_build_ipv4(uint8_t *p, uint32_t src, uint32_t dst, uint8_t tos, uint8_t ttl,
			uint16_t payload_len)
{
	p[0] = 0x45; /* version 4, IHL 5: no options */
	p[1] = tos;
	sroce_put_be16(p + 2, (uint16_t)(20 + payload_len));
	/*
	 * Identification 0 and DF: the ICRC covers the identification field, and
	 * a receiver behind a UDP socket cannot see it, so it must be a known
	 * constant. Linux sends id 0 for DF datagrams of an unconnected socket.
	 */
	sroce_put_be16(p + 4, 0);
	sroce_put_be16(p + 6, 0x4000);
	p[8] = ttl;
	p[9] = 17; /* UDP */
	sroce_put_be16(p + 10, 0);
	sroce_put_be32(p + 12, src);
	sroce_put_be32(p + 16, dst);
	sroce_put_be16(p + 10, csum_fold(csum_add(0, p, 20)));
	return 20;
}

size_t sroce_build_ipv6(uint8_t *p, const uint8_t src[16], const uint8_t dst[16], uint8_t tclass,
			uint32_t flow_label, uint8_t hop_limit, uint16_t payload_len)
{
	sroce_put_be32(p, 6u << 28 | (uint32_t)tclass << 20 | (flow_label & 0xfffff));
	sroce_put_be16(p + 4, payload_len);
	p[6] = 17; /* Next Header: UDP, no extension headers */
	p[7] = hop_limit;
	copy_bytes(p + 8, src, 16);
	copy_bytes(p + 24, dst, 16);
	return 40;
}

size_t sroce_build_udp(uint8_t *p, uint16_t sport, uint16_t dport, uint16_t len)
{
	sroce_put_be16(p, sport);
	sroce_put_be16(p + 2, dport);
	sroce_put_be16(p + 4, len);
	/* 0: "no checksum", which Annex A17 permits for RoCEv2 over IPv4; the
	 * ICRC protects the transport headers and payload end to end. */
	sroce_put_be16(p + 6, 0);
	return 8;
}

int sroce_udp_fill_checksum(uint8_t *ip, size_t len)
{
	size_t ip_len;
	uint32_t sum;

	if (len < 1)
		return -1;
	switch (ip[0] >> 4) {
	case 4:
		ip_len = (size_t)(ip[0] & 0xf) * 4;
		if (ip_len < 20 || len < ip_len + 8 || ip[9] != 17)
			return -1;
		sum = csum_add(0, ip + 12, 8); /* source, destination */
		break;
	case 6:
		ip_len = 40;
		if (len < ip_len + 8 || ip[6] != 17)
			return -1;
		sum = csum_add(0, ip + 8, 32);
		break;
	default:
		return -1;
	}
	uint8_t *udp = ip + ip_len;
	const size_t udp_len = sroce_get_be16(udp + 4);
	if (udp_len < 8 || udp_len > len - ip_len)
		return -1;
	sum += 17 + (uint32_t)udp_len; /* rest of the pseudo header */
	udp[6] = 0;
	udp[7] = 0;
	sum = csum_add(sum, udp, udp_len);
	uint16_t c = csum_fold(sum);
	/* A computed 0 is sent as all ones: 0 means "no checksum" (RFC 768). */
	sroce_put_be16(udp + 6, c == 0 ? 0xffff : c);
	return 0;
}
