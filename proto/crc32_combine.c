/* SPDX-License-Identifier: MIT */
/*
 * CRC-32 combination (icrc.h: sroce_crc32_shift, sroce_crc32_combine): the
 * register after A || B from the register after A and the CRC of B alone,
 * without reading A or B again. The idea is zlib's crc32_combine (Mark Adler;
 * the operator for n zero bytes is x^(8n) mod P, built from the powers
 * x^(8 * 2^k) mod P by one multiplication per set bit of n); this code is ours.
 *
 * sroce_crc32_update has no pre/post inversion, so it is linear in its
 * register: for a message B of n bytes,
 *   update(c, B) = c * x^(8n) + B * x^32   (mod P)
 *                = shift(c, n) ^ update(0, B),
 * which is all the combination needs (zlib's form carries the inversions).
 *
 * Values are reflected, as the CRC register is: bit 31 is the coefficient of
 * x^0, bit 0 that of x^31.
 */
#include "icrc.h"

/* x^(8 * 2^k) mod P, reflected, k = 0..31. P is primitive, so x^(2^32 - 1) = 1
 * and x^(8 * 2^32) = x^8: the powers repeat with period 32 in k, which is why
 * 32 entries serve any 64-bit length. The unit test recomputes each entry
 * (x^8, then squaring). */
const uint32_t sroce_crc32_x8pow[32] = {
	0x00800000u, 0x00008000u, 0xedb88320u, 0xb1e6b092u, 0xa06a2517u, 0xed627daeu, 0x88d14467u,
	0xd7bbfe6au, 0xec447f11u, 0x8e7ea170u, 0x6427800eu, 0x4d47bae0u, 0x09fe548fu, 0x83852d0fu,
	0x30362f1au, 0x7b5a9cc3u, 0x31fec169u, 0x9fec022au, 0x6c8dedc4u, 0x15d6874du, 0x5fde7a4eu,
	0xbad90e37u, 0x2e4e5eefu, 0x4eaba214u, 0xa8a472c0u, 0x429a969eu, 0x148d302au, 0xc40ba6d0u,
	0xc4e22c3cu, 0x40000000u, 0x20000000u, 0x08000000u,
};

uint32_t sroce_crc32_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	/* Schoolbook: for each coefficient of a from x^0 up, add b, then b *= x
	 * (reflected: a right shift; the x^31 coefficient leaving at bit 0
	 * becomes x^32 = P - x^32). */
	for (uint32_t m = 0x80000000u; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = (b >> 1) ^ (0xedb88320u & (0u - (b & 1)));
	}
	return prod;
}

uint32_t sroce_crc32_shift(uint32_t crc, uint64_t len)
{
	for (unsigned k = 0; len && crc; k++, len >>= 1)
		if (len & 1)
			crc = sroce_crc32_mulmod(crc, sroce_crc32_x8pow[k & 31]);
	return crc;
}

uint32_t sroce_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return sroce_crc32_shift(crc_a, len_b) ^ crc_b;
}
