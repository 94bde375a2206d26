/* SPDX-License-Identifier: MIT */
/*
 * Verifying the ICRC of an IPv4 packet whose identification the receiver did
 * not see (docs/wire.md, "Peers that choose their own IPv4 identification").
 *
 * The ICRC covers the identification (A17.3.3 masks TOS, TTL and the header
 * checksum only). CRC-32 is affine over GF(2): for a fixed length, flipping
 * input bits XORs the output with a value that depends only on which bits
 * flipped. The identification sits 4 bytes into the IP header, followed by
 * k = 14 (rest of IPv4) + 8 (UDP) + len (BTH .. pad) bytes, so
 *
 *   ICRC(id) = ICRC(0) ^ Z_k(G(id))
 *
 * with G(id) the CRC register after the two bytes of id from a zero register
 * (linear, one to one: a non-zero polynomial of degree < 16 times x^32 is
 * never a multiple of the degree-32 generator) and Z_k "k zero bytes more"
 * (linear and invertible: the generator has a constant term). The image of
 * id -> Z_k(G(id)) is a 16-dimensional subspace of the 2^32 syndromes; the
 * solver below is a basis of it in echelon form, so a syndrome is reduced in
 * 32 steps to 0 (in the image: the id is recovered exactly) or not (corrupt).
 */
#include "icrc.h"
#include "int.h"

/* The CRC register after one zero byte from `reg` (no pre/post inversion):
 * linear in `reg`. */
static uint32_t zero_byte(uint32_t reg)
{
	return sroce_crc32_table[0][reg & 0xff] ^ (reg >> 8);
}

/* GF(2) 32x32 matrices as the images of the 32 unit vectors. */
static uint32_t mat_vec(const uint32_t m[32], uint32_t v)
{
	uint32_t r = 0;
	for (int j = 0; v; j++, v >>= 1)
		if (v & 1)
			r ^= m[j];
	return r;
}

static void mat_square(uint32_t out[32], const uint32_t m[32])
{
	for (int j = 0; j < 32; j++)
		out[j] = mat_vec(m, m[j]);
}

void sroce_icrc_id_solver_init(struct sroce_icrc_id_solver *s, size_t len)
{
	uint32_t col[16];
	uint32_t z[32], z2[32];

	/* G(e_i): the two id bytes big-endian, as on the wire. */
	for (int i = 0; i < 16; i++) {
		const uint8_t b[2] = { (uint8_t)((1u << i) >> 8), (uint8_t)(1u << i) };
		col[i] = sroce_crc32_table[0][b[0]];
		col[i] = sroce_crc32_table[0][(col[i] ^ b[1]) & 0xff] ^ (col[i] >> 8);
	}
	/* Z_k by squaring: z = Z_{2^b}, applied for each set bit b of k. */
	for (int j = 0; j < 32; j++)
		z[j] = zero_byte(1u << j);
	for (size_t k = len + 22; k; k >>= 1) {
		if (k & 1)
			for (int i = 0; i < 16; i++)
				col[i] = mat_vec(z, col[i]);
		if (k > 1) {
			mat_square(z2, z);
			for (int j = 0; j < 32; j++)
				z[j] = z2[j];
		}
	}
	for (int i = 0; i < 16; i++)
		s->col[i] = col[i];
	/* Echelon basis indexed by its highest set bit, with the ids that make it. */
	for (int j = 0; j < 32; j++) {
		s->basis[j] = 0;
		s->combo[j] = 0;
	}
	for (int i = 0; i < 16; i++) {
		uint32_t v = col[i];
		uint16_t c = (uint16_t)(1u << i);
		for (int j = 31; j >= 0 && v; j--) {
			if (!(v >> j & 1))
				continue;
			if (!s->basis[j]) {
				s->basis[j] = v;
				s->combo[j] = c;
				break;
			}
			v ^= s->basis[j];
			c ^= s->combo[j];
		}
	}
	s->len = (uint32_t)len;
	s->valid = 1;
}

int sroce_icrc_id_solve(const struct sroce_icrc_id_solver *s, uint32_t syndrome, uint16_t *ip_id)
{
	uint16_t id = 0;

	for (int j = 31; j >= 0 && syndrome; j--) {
		if (!(syndrome >> j & 1))
			continue;
		if (!s->basis[j])
			return -1;
		syndrome ^= s->basis[j];
		id ^= s->combo[j];
	}
	*ip_id = id;
	return 0;
}

const struct sroce_icrc_id_solver *sroce_icrc_id_cache_get(struct sroce_icrc_id_cache *c, size_t len)
{
	struct sroce_icrc_id_solver *s = &c->slot[(len >> 2) % SROCE_ICRC_ID_CACHE];

	if (!s->valid || s->len != len) {
		sroce_icrc_id_solver_init(s, len);
		c->builds++;
	}
	return s;
}

int sroce_icrc_set_ip_id(uint8_t *udp, size_t len, uint16_t ip_id, struct sroce_icrc_id_cache *c)
{
	size_t shim = 0;

	/* The ICRC does not cover an INT shim (docs/wire.md, INT): the covered
	 * payload, and with it the pseudo header's lengths, start behind it. */
	if (sroce_int_present(udp, len)) {
		struct sroce_int_shim sh;
		if (sroce_int_shim_parse(udp, len, &sh) != SROCE_INT_OK)
			return -1;
		shim = sroce_int_shim_bytes(&sh);
	}
	if (len < shim + SROCE_BTH_LEN + SROCE_ICRC_LEN)
		return -1;
	if (ip_id == 0)
		return 0;
	const size_t covered = len - shim - SROCE_ICRC_LEN;
	uint8_t *icrc = udp + len - SROCE_ICRC_LEN;
	sroce_icrc_put(icrc, sroce_icrc_get(icrc) ^ sroce_icrc_id_delta(sroce_icrc_id_cache_get(c, covered), ip_id));
	return 0;
}

static bool gid_v4(const uint8_t g[16])
{
	for (int i = 0; i < 10; i++)
		if (g[i])
			return false;
	return g[10] == 0xff && g[11] == 0xff;
}

int sroce_icrc_check(const struct sroce_icrc_addr *a, int32_t ip_id, const uint8_t *payload,
		     size_t len, uint32_t icrc, struct sroce_icrc_id_cache *cache, uint16_t *recovered)
{
	const bool v4 = gid_v4(a->src_gid) && gid_v4(a->dst_gid);

	/* A known id is checked with that id only: sroce's own GSO segments carry
	 * the ICRC of the id the kernel gives them (sroce_icrc_set_ip_id). */
	if (v4 && ip_id > 0)
		return sroce_icrc_payload_id(a, (uint16_t)ip_id, payload, len) == icrc ? SROCE_ICRC_OK
											: SROCE_ICRC_BAD;
	const uint32_t syndrome = sroce_icrc_payload(a, payload, len) ^ icrc;
	if (syndrome == 0)
		return SROCE_ICRC_OK;
	/* IPv6 has no identification; a known id already failed. */
	if (!v4 || ip_id == 0 || !cache)
		return SROCE_ICRC_BAD;
	uint16_t id;
	if (sroce_icrc_id_solve(sroce_icrc_id_cache_get(cache, len), syndrome, &id) != 0)
		return SROCE_ICRC_BAD;
	if (recovered)
		*recovered = id;
	return SROCE_ICRC_OK_ID_RECOVERED;
}
