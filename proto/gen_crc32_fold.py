#!/usr/bin/python3
"""Folding and Barrett constants for the PCLMULQDQ CRC-32 in proto/crc32_fast.c.

CRC-32 here is the Ethernet CRC that IBA Annex A17.3.3 uses for the RoCEv2 ICRC:
P(x) = x^32 + 0x04C11DB7, processed bit-reflected (0xEDB88320). The method is
Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
Instruction" (V. Gopal, E. Ozturk, J. Guilford, G. Wolrich, W. Feghali,
M. Dixon, D. Karakoyunlu, 2009); the derivation below is ours.

Usage:
  gen_crc32_fold.py            print the C constant block
  gen_crc32_fold.py --check F  exit 1 unless file F contains exactly that block

Either way the script first runs a bit-exact model of the C code (the same
carry-less multiplies, shifts, byte shuffles on the same register layouts)
against a bit-by-bit CRC on random inputs and refuses to print constants that
fail it.

Layout ("reflected"): a 16-byte little-endian load is a 128-bit integer R
whose bit k is the coefficient of x^(127-k), so the first byte on the wire is
the highest degree, as the reflected CRC requires. A 64x64 carry-less
multiply of reflected operands of n and m bits yields a reflected product of
n+m-1 bits; read back as 128 bits it is the true product times x^(128-(n+m-1)).
Every constant is chosen so that this extra power cancels:

- Folding R = h*x^64 + l (h = low qword, l = high qword) forward by D bits:
  R*x^D = h*x^(D+64) + l*x^D. A 64-bit operand times a 33-bit constant reads
  back as product*x^32, so h is multiplied by (x^(D+32) mod P) and l by
  (x^(D-32) mod P), each stored as a 33-bit reflected value (bit i = coefficient
  of x^(32-i)): reflect32(K) << 1. The folded value is congruent mod P and
  still fits in 128 bits, so it is simply XORed into the data D bits ahead.
- Final reduction of R to the CRC, R*x^32 mod P:
  1. R*x^32 = h*x^96 + l*x^32 -> h*(x^96 mod P) + l*x^32 (96 bits);
  2. the top 32 bits s times (x^64 mod P), plus the low 64 bits (64 bits);
  3. Barrett: with mu = floor(x^64 / P), q = floor(floor(A/x^32)*mu / x^32)
     is floor(A/P) exactly (polynomials, deg A <= 63), and
     A mod P = (A + q*P) mod x^32.
"""
import random
import sys

POLY_NORMAL = 0x104C11DB7  # x^32 + ..., IEEE 802.3
M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
M128 = (1 << 128) - 1


# --- GF(2)[x] arithmetic on ints (bit i = coefficient of x^i) ---------------------

def pmod(a, p):
    dp = p.bit_length() - 1
    while a.bit_length() - 1 >= dp:
        a ^= p << (a.bit_length() - 1 - dp)
    return a


def pdiv(a, p):
    q = 0
    dp = p.bit_length() - 1
    while a.bit_length() - 1 >= dp:
        s = a.bit_length() - 1 - dp
        q |= 1 << s
        a ^= p << s
    return q


def xpow_mod(k):
    return pmod(1 << k, POLY_NORMAL)


def reflect(v, nbits):
    r = 0
    for i in range(nbits):
        if v >> i & 1:
            r |= 1 << (nbits - 1 - i)
    return r


def k33(k):
    """x^k mod P as a 33-bit reflected multiplier (bit i = coefficient of x^(32-i))."""
    return reflect(xpow_mod(k), 32) << 1


# The constants, by name; each pair is (multiplier of the low qword h,
# multiplier of the high qword l) for one fold distance D.
FOLDS = [("fold_512", 512), ("fold_384", 384), ("fold_256", 256), ("fold_128", 128)]
# The wide path (VPCLMULQDQ on 512-bit registers: four 128-bit lanes per
# register, four registers): 2048 bits per step, then the four registers into
# one (1536, 1024, 512 bits). Same formula; the C unit tests check that path.
WIDE_FOLDS = [("fold_2048", 2048), ("fold_1536", 1536), ("fold_1024", 1024)]
# The 256-bit path (VPCLMULQDQ on AVX2 registers: two lanes per register, four
# registers): 1024 bits per step (fold_1024 above), then the four registers
# into one (768, 512, 256 bits).
YMM_FOLDS = [("fold_768", 768)]


def constants():
    c = {}
    for name, d in FOLDS + WIDE_FOLDS + YMM_FOLDS:
        c[name] = (k33(d + 32), k33(d - 32))
    c["reduce_96_64"] = (k33(96), k33(64))
    mu = pdiv(1 << 64, POLY_NORMAL)  # degree 32
    c["barrett"] = (reflect(mu, 33), reflect(POLY_NORMAL, 33))
    return c


# --- a model of crc32_fast.c, operation for operation -----------------------------

def clmul(a, b):
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def load16(buf, off):
    return int.from_bytes(buf[off:off + 16], "little")


def fold(x, k):
    return clmul(x & M64, k[0]) ^ clmul(x >> 64, k[1])


def pshufb(x, mask):
    src = x.to_bytes(16, "little")
    out = bytes(0 if m & 0x80 else src[m & 15] for m in mask)
    return int.from_bytes(out, "little")


def blendv(a, b, mask):
    ab, bb = a.to_bytes(16, "little"), b.to_bytes(16, "little")
    return int.from_bytes(bytes(bb[i] if mask[i] & 0x80 else ab[i] for i in range(16)), "little")


# 0x80 zeroes a byte in PSHUFB; windows at offset n give the two shift masks.
SHUF = [0x80] * 16 + list(range(16)) + [0x80] * 16


def model_crc(crc, buf, c):
    n = len(buf)
    assert n >= 64
    x = [load16(buf, 16 * i) for i in range(4)]
    x[0] ^= crc
    pos = 64
    while n - pos >= 64:
        x = [fold(x[i], c["fold_512"]) ^ load16(buf, pos + 16 * i) for i in range(4)]
        pos += 64
    r = fold(x[0], c["fold_384"]) ^ fold(x[1], c["fold_256"]) ^ fold(x[2], c["fold_128"]) ^ x[3]
    while n - pos >= 16:
        r = fold(r, c["fold_128"]) ^ load16(buf, pos)
        pos += 16
    t = n - pos
    if t:
        # 16 + t bytes remain: r then t new bytes. Split them into the first t
        # bytes of r (fold forward 128) and the last 16 bytes of the input.
        shl = SHUF[t:t + 16]            # first t bytes of r at the top
        shr = SHUF[16 + t:32 + t]       # r without its first t bytes, at the bottom
        last = load16(buf, n - 16)
        r = fold(pshufb(r, shl), c["fold_128"]) ^ blendv(pshufb(r, shr), last, shr)
    kr = c["reduce_96_64"]
    s = clmul(r & M64, kr[0]) ^ (r >> 64)               # 96 bits
    s = clmul(s & M32, kr[1]) ^ (s >> 32)               # 64 bits
    mu, p = c["barrett"]
    q = clmul(s & M32, mu) & M32
    return ((s ^ clmul(q, p)) >> 32) & M32


def ref_crc(crc, buf):
    for b in buf:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc


def self_test(c):
    rng = random.Random(1)
    lengths = list(range(64, 200)) + [255, 256, 257, 511, 1024, 1031]
    for n in lengths:
        buf = bytes(rng.getrandbits(8) for _ in range(n))
        seed = rng.getrandbits(32)
        got, want = model_crc(seed, buf, c), ref_crc(seed, buf)
        if got != want:
            sys.exit("gen_crc32_fold.py: model disagrees at length %d: %08x != %08x" % (n, got, want))


def c_block(c):
    out = []
    out.append("/* BEGIN GENERATED by proto/gen_crc32_fold.py; do not edit. */")
    for name, d in FOLDS + WIDE_FOLDS + YMM_FOLDS:
        lo, hi = c[name]
        out.append("/* fold %d bits: x^%d mod P, x^%d mod P (33-bit reflected) */" % (d, d + 32, d - 32))
        out.append("#define K_%s_LO 0x%09xull" % (name.upper(), lo))
        out.append("#define K_%s_HI 0x%09xull" % (name.upper(), hi))
    lo, hi = c["reduce_96_64"]
    out.append("/* final reduction: x^96 mod P, x^64 mod P (33-bit reflected) */")
    out.append("#define K_REDUCE_96 0x%09xull" % lo)
    out.append("#define K_REDUCE_64 0x%09xull" % hi)
    mu, p = c["barrett"]
    out.append("/* Barrett: mu = floor(x^64 / P) and P itself, 33-bit reflected */")
    out.append("#define K_BARRETT_MU 0x%09xull" % mu)
    out.append("#define K_BARRETT_P 0x%09xull" % p)
    out.append("/* END GENERATED */")
    return "\n".join(out) + "\n"


def main():
    c = constants()
    self_test(c)
    block = c_block(c)
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            text = f.read()
        if block not in text:
            sys.exit("%s: constant block is stale; regenerate with %s" % (sys.argv[2], sys.argv[0]))
        return
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    sys.stdout.write(block)


if __name__ == "__main__":
    main()
