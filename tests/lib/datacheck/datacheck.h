/* sroce-datacheck: a data checker across two hosts that no transport can fool.
 *
 * The client (requester) and the server (responder) derive the same plan from a seed: a
 * sequence of steps, each one of SEND, SEND with immediate, RDMA WRITE, WRITE with
 * immediate, RDMA READ, FETCH_AND_ADD, and COMPARE_AND_SWAP that matches or misses, with
 * random lengths (0, small, around the MTU, up to the maximum), random offsets on both
 * sides and 1 to 3 gather elements. Every byte that arrives is compared with what the plan
 * says must be there, and every byte around it with the canary that must still be there.
 * See tests/README.md ("The data checker").
 */
#ifndef SROCE_DATACHECK_H
#define SROCE_DATACHECK_H

#include <stddef.h>
#include <stdint.h>

enum dc_op {
	DC_SEND,
	DC_SEND_IMM,
	DC_WRITE,
	DC_WRITE_IMM,
	DC_READ,
	DC_FAA,
	DC_CAS_HIT,
	DC_CAS_MISS,
	DC_NOPS
};

#define DC_MAX_SGE 3
#define DC_GAP 64 /* the largest gap between gather pieces, and the largest start offset */
#define DC_WORDS 64 /* atomic targets */
#define DC_MARKER_MAGIC 0x5343484bu /* "SCHK" */

struct dc_piece {
	uint32_t off; /* in the client's send slot */
	uint32_t len;
};

struct dc_step {
	enum dc_op op;
	uint32_t len; /* bytes moved (atomics: 8) */
	uint32_t nsge;
	struct dc_piece sge[DC_MAX_SGE];
	uint32_t recv_off; /* where the server's receive buffer starts in its recv slot */
	uint32_t remote_off; /* WRITE*: in the server's write slot; READ: in its read source */
	uint32_t read_off; /* READ: where the data lands in the client's read slot */
	uint32_t imm;
	uint32_t word; /* atomics: index of the 8-byte target */
	uint64_t add, compare, swap;
	uint64_t expect_orig; /* atomics: the value the responder must return */
};

struct dc_params {
	uint64_t seed;
	uint32_t steps;
	uint32_t max_size;
	uint32_t slots; /* steps per round: every step of a round has its own buffers */
	uint32_t max_sge;
	uint32_t mtu;
	uint32_t min_size; /* 0: zero-length transfers are part of the plan */
	/* --late-recv: the server posts each round's receives this many ms after its go, so
	 * the client's SENDs meet RNR NAKs; DC_LATE_NEVER: it never posts them, and the first
	 * operation that needs a receive must end in RNR_RETRY_EXC_ERR (not part of the plan). */
	uint32_t late_recv_ms;
};
#define DC_LATE_NEVER 0xffffffffu

/* The layout both sides agree on (offsets in bytes from each MR's start). */
struct dc_layout {
	size_t slot; /* bytes of one slot */
	/* server */
	size_t recv0, write0, rsrc0, rsrc_len, words0, server_len;
	/* client */
	size_t send0, rdst0, ares0, marker0, client_len;
};

void dc_layout_of(const struct dc_params *p, struct dc_layout *l);
/* Fills steps[0..p->steps) and, in words[DC_WORDS], the atomic targets' final values
 * (words must hold their initial values, dc_word_init, on entry). */
void dc_plan(const struct dc_params *p, struct dc_step *steps, uint64_t *words);
uint64_t dc_word_init(uint64_t seed, uint32_t w);
/* The k-th byte of step i's data; the k-th byte of the server's read source. */
uint8_t dc_data_byte(uint64_t seed, uint32_t step, uint32_t k);
void dc_fill_data(uint64_t seed, uint32_t step, uint8_t *dst, uint32_t from, uint32_t len);
void dc_fill_rsrc(uint64_t seed, uint8_t *dst, size_t len);
/* The canary of a buffer in round r (tag names which buffer). */
void dc_fill_canary(uint64_t seed, uint32_t round, uint32_t tag, uint8_t *dst, size_t len);
const char *dc_op_name(enum dc_op op);

/* Compares got[0..len) with want; prints up to a few mismatches as "what: byte N ...";
 * returns the number of bytes that differ. */
size_t dc_compare(const char *what, uint32_t step, const uint8_t *got, const uint8_t *want,
		  size_t len);

#endif
