/* sroce-datacheck: the plan both sides derive from the seed, the data and canary patterns,
 * and the byte-for-byte comparison (datacheck.h). */
#include "datacheck.h"

#include <stdio.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
	/* splitmix64's finaliser */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

struct rng {
	uint64_t s;
};

static uint64_t next(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return mix64(r->s);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)(next(r) % n) : 0;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

void dc_layout_of(const struct dc_params *p, struct dc_layout *l)
{
	/* A slot holds the largest transfer after a start offset and gaps between pieces. */
	l->slot = round_up((size_t)p->max_size + (DC_MAX_SGE + 1) * DC_GAP, 4096);
	l->recv0 = 0;
	l->write0 = l->recv0 + p->slots * l->slot;
	l->rsrc0 = l->write0 + p->slots * l->slot;
	l->rsrc_len = round_up((size_t)p->max_size + DC_GAP, 64);
	l->words0 = round_up(l->rsrc0 + l->rsrc_len, 64);
	l->server_len = round_up(l->words0 + DC_WORDS * 8, 4096);
	l->send0 = 0;
	l->rdst0 = l->send0 + p->slots * l->slot;
	l->ares0 = l->rdst0 + p->slots * l->slot;
	l->marker0 = l->ares0 + p->slots * 8;
	l->client_len = round_up(l->marker0 + p->slots * 8, 4096);
}

uint64_t dc_word_init(uint64_t seed, uint32_t w)
{
	return mix64(seed ^ (0xa70a1c00ull + w));
}

uint8_t dc_data_byte(uint64_t seed, uint32_t step, uint32_t k)
{
	uint64_t v = mix64(seed ^ ((uint64_t)step << 32) ^ (k >> 3) ^ 0xda7a000000000000ull);
	return (uint8_t)(v >> ((k & 7) * 8));
}

void dc_fill_data(uint64_t seed, uint32_t step, uint8_t *dst, uint32_t from, uint32_t len)
{
	for (uint32_t k = 0; k < len; k++)
		dst[k] = dc_data_byte(seed, step, from + k);
}

void dc_fill_rsrc(uint64_t seed, uint8_t *dst, size_t len)
{
	/* Offset-dependent, so a READ from the wrong address returns the wrong bytes. */
	for (size_t k = 0; k < len; k++)
		dst[k] = dc_data_byte(seed, 0xffffffffu, (uint32_t)k);
}

void dc_fill_canary(uint64_t seed, uint32_t round, uint32_t tag, uint8_t *dst, size_t len)
{
	uint64_t base = mix64(seed ^ 0xca4a700000000000ull ^ ((uint64_t)round << 20) ^ tag);
	for (size_t k = 0; k < len; k += 8) {
		uint64_t v = mix64(base + k);
		size_t n = len - k < 8 ? len - k : 8;
		memcpy(dst + k, &v, n);
	}
}

const char *dc_op_name(enum dc_op op)
{
	static const char *const names[DC_NOPS] = {"send",  "send_imm", "write", "write_imm",
						   "read",  "faa",      "cas_hit", "cas_miss"};
	return op < DC_NOPS ? names[op] : "?";
}

/* A length: zero, a few bytes, around a multiple of the MTU, or anything up to the maximum. */
static uint32_t pick_len(struct rng *r, const struct dc_params *p)
{
	uint32_t len;
	switch (below(r, 16)) {
	case 0:
		len = 0;
		break;
	case 1:
	case 2:
	case 3:
		len = 1 + below(r, 64);
		break;
	case 4:
	case 5:
	case 6:
	case 7: {
		uint32_t k = 1 + below(r, 4);
		len = k * p->mtu - 2 + below(r, 5);
		break;
	}
	default:
		len = 1 + below(r, p->max_size);
	}
	if (len > p->max_size)
		len = p->max_size;
	if (len < p->min_size)
		len = p->min_size;
	return len;
}

void dc_plan(const struct dc_params *p, struct dc_step *steps, uint64_t *words)
{
	struct rng r = {p->seed};
	enum dc_op order[DC_NOPS];

	for (uint32_t i = 0; i < p->steps; i++) {
		struct dc_step *s = &steps[i];

		/* Every block of DC_NOPS steps has each operation once, in a random order. */
		if (i % DC_NOPS == 0) {
			for (int k = 0; k < DC_NOPS; k++)
				order[k] = (enum dc_op)k;
			for (int k = DC_NOPS - 1; k > 0; k--) {
				uint32_t j = below(&r, (uint32_t)k + 1);
				enum dc_op t = order[k];
				order[k] = order[j];
				order[j] = t;
			}
		}
		memset(s, 0, sizeof(*s));
		s->op = order[i % DC_NOPS];
		s->recv_off = below(&r, DC_GAP);
		s->imm = (uint32_t)next(&r);
		if (s->op >= DC_FAA) {
			s->len = 8;
			s->word = below(&r, DC_WORDS);
			s->expect_orig = words[s->word];
			s->add = next(&r);
			s->swap = next(&r);
			s->compare = s->op == DC_CAS_HIT ? words[s->word]
							 : words[s->word] ^ (next(&r) | 1);
			if (s->op == DC_FAA)
				words[s->word] += s->add;
			else if (s->op == DC_CAS_HIT)
				words[s->word] = s->swap;
			continue;
		}
		s->len = pick_len(&r, p);
		s->remote_off = below(&r, DC_GAP);
		s->read_off = below(&r, DC_GAP);
		/* The gather list: up to max_sge pieces at random gaps in the send slot. */
		uint32_t nsge = s->len == 0 ? 0 : 1 + below(&r, p->max_sge < DC_MAX_SGE ? p->max_sge : DC_MAX_SGE);
		if (nsge > s->len)
			nsge = s->len;
		if (s->op == DC_READ && nsge > 1)
			nsge = 1; /* READ scatters into one piece: the client checks it */
		s->nsge = nsge;
		uint32_t left = s->len, off = below(&r, DC_GAP);
		for (uint32_t k = 0; k < nsge; k++) {
			uint32_t n = k + 1 == nsge ? left : 1 + below(&r, left - (nsge - 1 - k));
			s->sge[k].off = off;
			s->sge[k].len = n;
			off += n + below(&r, DC_GAP);
			left -= n;
		}
	}
}

size_t dc_compare(const char *what, uint32_t step, const uint8_t *got, const uint8_t *want,
		  size_t len)
{
	size_t bad = 0;
	for (size_t k = 0; k < len; k++) {
		if (got[k] == want[k])
			continue;
		if (bad < 4)
			fprintf(stderr,
				"datacheck: FAIL step %u: %s: byte %zu is 0x%02x, expected 0x%02x\n",
				step, what, k, got[k], want[k]);
		bad++;
	}
	if (bad > 4)
		fprintf(stderr, "datacheck: FAIL step %u: %s: %zu bytes differ of %zu\n", step, what,
			bad, len);
	return bad;
}
