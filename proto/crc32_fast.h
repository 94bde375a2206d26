/* SPDX-License-Identifier: MIT */
/*
 * The CRC-32 implementations behind sroce_crc32_update (icrc.h): reflected
 * 0xEDB88320, no pre/post inversion, as the RoCEv2 ICRC (IBA Annex A17.3.3)
 * uses it. Everyone else calls sroce_crc32_update, which picks the fastest;
 * these are exported so the unit tests and bench_crc32 can compare them.
 *
 * - table: slicing-by-8 (icrc.c, proto/crc32_table.c). Everywhere.
 * - pclmul: PCLMULQDQ folding (crc32_fast.c), x86-64 userspace only, chosen
 *   at run time from CPUID.
 * - vpclmul: the same folding on 512-bit registers (VPCLMULQDQ, AVX-512F),
 *   from SROCE_CRC32_WIDE_MIN bytes up, where CPUID and XCR0 allow it.
 * - vpclmul256: the same on 256-bit registers (VPCLMULQDQ, AVX2), from
 *   SROCE_CRC32_YMM_MIN bytes up, for CPUs with VPCLMULQDQ but no AVX-512
 *   (AMD Zen 3, Intel Alder Lake client cores).
 * Each has a copy variant (sroce_crc32_copy_*): the CRC of what it copies, in
 * the same pass. The kernel (no SSE in kernel context without
 *   kernel_fpu_begin), BPF and other architectures compile the table path only.
 */
#ifndef SROCE_PROTO_CRC32_FAST_H
#define SROCE_PROTO_CRC32_FAST_H

#include "roce.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__x86_64__) && !defined(__KERNEL__) && !defined(__bpf__)
#define SROCE_CRC32_HAVE_PCLMUL 1
#else
#define SROCE_CRC32_HAVE_PCLMUL 0
#endif

/* Shortest input the four-lane folding takes: it starts with four 16-byte lanes. */
#define SROCE_CRC32_FOLD_MIN 64

/* Shortest input the folding path takes at all: from 16 to 63 bytes one register
 * folds block by block. Below 16 bytes the tables. On the Zen 3 of 7 December, a
 * chain of CRCs of one length (each the next one's seed, as the ICRC's pseudo
 * header feeds its payload), ns per call, tables / folding: 20 bytes 18.0 / 12.2,
 * 40 (the IPv4 pseudo header) 20.4 / 14.4, 60 (IPv6) 38.9 / 16.6. */
#define SROCE_CRC32_SHORT_MIN 16

/* Shortest input the wide path takes (four 64-byte registers). */
#define SROCE_CRC32_WIDE_MIN 256

/* Shortest input the 256-bit path takes (four 32-byte registers, then at
 * least one more step). */
#define SROCE_CRC32_YMM_MIN 256

/* Slicing-by-8; any length. */
uint32_t sroce_crc32_update_table(uint32_t crc, const uint8_t *p, size_t len);
/* The same while copying `len` bytes from src to dst (no overlap). */
uint32_t sroce_crc32_copy_table(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len);

/* Nonzero when this build has the folding path and the CPU runs it
 * (CPUID.01H:ECX PCLMULQDQ and SSE4.1). The CPUID result is cached. */
int sroce_crc32_pclmul_supported(void);

/* PCLMULQDQ folding for len >= SROCE_CRC32_SHORT_MIN, the tables below that.
 * Call only when sroce_crc32_pclmul_supported(); builds without the folding
 * path alias it to the tables. */
uint32_t sroce_crc32_update_pclmul(uint32_t crc, const uint8_t *p, size_t len);
uint32_t sroce_crc32_copy_pclmul(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len);

/* Nonzero when this build has the wide path and the CPU and OS run it
 * (CPUID.07H: AVX512F and VPCLMULQDQ; XCR0: ZMM state enabled). Cached. */
int sroce_crc32_vpclmul_supported(void);

/* The wide path for len >= SROCE_CRC32_WIDE_MIN, the PCLMULQDQ one below.
 * Call only when sroce_crc32_vpclmul_supported(). */
uint32_t sroce_crc32_update_vpclmul(uint32_t crc, const uint8_t *p, size_t len);
uint32_t sroce_crc32_copy_vpclmul(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len);

/* Nonzero when this build has the 256-bit path and the CPU and OS run it
 * (CPUID.07H: AVX2 and VPCLMULQDQ; XCR0: YMM state enabled). Cached. */
int sroce_crc32_vpclmul256_supported(void);

/* The 256-bit path for len >= SROCE_CRC32_YMM_MIN, the PCLMULQDQ one below.
 * Call only when sroce_crc32_vpclmul256_supported(). */
uint32_t sroce_crc32_update_vpclmul256(uint32_t crc, const uint8_t *p, size_t len);
uint32_t sroce_crc32_copy_vpclmul256(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROTO_CRC32_FAST_H */
