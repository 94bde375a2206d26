/* SPDX-License-Identifier: MIT */
/*
 * Shared by sroce's tc programs: locating the RoCEv2 payload (the BTH) in a
 * packet, and the few opcode facts a BPF program needs. BPF-only: include
 * after <linux/bpf.h> and <bpf/bpf_helpers.h>; compile with -ffreestanding so
 * proto/roce.h gets clang's freestanding <stdint.h>.
 *
 * The wire itself (opcodes, BTH/AETH layout, PSN arithmetic) comes from
 * proto/roce.h; only its inline accessors are used here, never proto/ *.c.
 *
 * Packet access is direct (skb->data .. skb->data_end) with a bounds check in
 * front of every read, so the programs need no kernel BTF and load on older
 * kernels (Debian 12's 6.1) as well as new ones.
 */
#ifndef SROCE_EBPF_ROCE_BPF_H
#define SROCE_EBPF_ROCE_BPF_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>

#include "proto/roce.h"

#define SROCE_BPF_MAX_VLAN 2   /* 802.1Q, and 802.1ad outer tag (QinQ) */
#define SROCE_BPF_MAX_IPV6_EXT 4

/* Where the UDP payload of a RoCEv2 candidate starts, and who sent it. */
struct sroce_bpf_flow {
	/* 8-byte aligned: copied and compared as two 64-bit words, not 16 bytes. */
	uint8_t src[16] __attribute__((aligned(8))); /* IPv6, or IPv4-mapped ::ffff:a.b.c.d */
	uint8_t dst[16] __attribute__((aligned(8)));
	uint32_t payload_off; /* offset of the UDP payload from skb->data (the MAC header) */
	uint32_t ip_len;      /* IP total length (header + payload) as the header says */
	uint16_t udp_len;     /* UDP length field, header included */
	uint16_t sport;
	uint16_t dport;
	uint8_t ecn;          /* IP ECN field (RFC 3168): 3 is CE */
	uint8_t is_v6;
};

enum sroce_bpf_parse {
	SROCE_BPF_PARSE_UDP = 0, /* a UDP datagram: flow filled in */
	SROCE_BPF_PARSE_NOT_IP,
	SROCE_BPF_PARSE_NOT_UDP,
	SROCE_BPF_PARSE_RUNT,
	SROCE_BPF_PARSE_TRUNC_IP,
	SROCE_BPF_PARSE_TRUNC_UDP,
	SROCE_BPF_PARSE_IP_FRAG,
	SROCE_BPF_PARSE_IPV6_EXT,
};

/* out: 8-byte aligned; v4: the address as it sits in the IPv4 header. */
static __always_inline void sroce_bpf_v4mapped(uint8_t out[16], const uint32_t *v4)
{
	*(uint64_t *)out = 0;
	*(uint32_t *)(out + 8) = bpf_htonl(0xffff);
	*(uint32_t *)(out + 12) = *v4; /* already in network order */
}

/*
 * Parse Ethernet (up to two VLAN tags), IPv4 or IPv6 (walking up to
 * SROCE_BPF_MAX_IPV6_EXT extension headers), and the UDP header. Fragments
 * are refused: a non-first fragment has no UDP header, and a first fragment
 * does not hold the whole datagram.
 * Truncation results (RUNT, TRUNC_*) may only mean the headers are not in the
 * linear part of the skb; the caller may pull and parse again.
 */
static __always_inline enum sroce_bpf_parse sroce_bpf_parse_udp(const struct __sk_buff *skb,
								 struct sroce_bpf_flow *f)
{
	const uint8_t *data = (const uint8_t *)(long)skb->data;
	const uint8_t *end = (const uint8_t *)(long)skb->data_end;
	uint32_t off = ETH_HLEN;
	uint16_t proto;
	uint8_t l4;

	if (data + ETH_HLEN > end)
		return SROCE_BPF_PARSE_RUNT;
	proto = ((const struct ethhdr *)data)->h_proto;

#pragma unroll
	for (int i = 0; i < SROCE_BPF_MAX_VLAN; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		/* TCI(16) then the encapsulated EtherType (IEEE 802.1Q 9.6). */
		if (data + off + 4 > end)
			return SROCE_BPF_PARSE_RUNT;
		proto = *(const uint16_t *)(data + off + 2);
		off += 4;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		const struct iphdr *ip = (const struct iphdr *)(data + off);
		uint32_t ihl;

		if ((const uint8_t *)(ip + 1) > end)
			return SROCE_BPF_PARSE_TRUNC_IP;
		ihl = (uint32_t)ip->ihl * 4;
		if (ip->version != 4 || ihl < sizeof(*ip))
			return SROCE_BPF_PARSE_TRUNC_IP;
		/* More-fragments or a fragment offset: not one whole datagram. */
		if (ip->frag_off & bpf_htons(0x3fff))
			return SROCE_BPF_PARSE_IP_FRAG;
		if (ip->protocol != IPPROTO_UDP)
			return SROCE_BPF_PARSE_NOT_UDP;
		sroce_bpf_v4mapped(f->src, &ip->saddr);
		sroce_bpf_v4mapped(f->dst, &ip->daddr);
		f->ecn = ip->tos & 3;
		f->ip_len = bpf_ntohs(ip->tot_len);
		f->is_v6 = 0;
		if (f->ip_len < ihl + sizeof(struct udphdr))
			return SROCE_BPF_PARSE_TRUNC_IP;
		off += ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = (const struct ipv6hdr *)(data + off);
		uint32_t ext_len = 0;

		if ((const uint8_t *)(ip6 + 1) > end)
			return SROCE_BPF_PARSE_TRUNC_IP;
		if (ip6->version != 6)
			return SROCE_BPF_PARSE_TRUNC_IP;
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);
		/* Traffic class straddles the first two bytes: its low 2 bits are ECN. */
		f->ecn = (ip6->flow_lbl[0] >> 4) & 3;
		f->ip_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
		f->is_v6 = 1;
		l4 = ip6->nexthdr;
		off += sizeof(*ip6);

#pragma unroll
		for (int i = 0; i < SROCE_BPF_MAX_IPV6_EXT; i++) {
			const uint8_t *h = data + off;
			uint32_t len;

			if (l4 == IPPROTO_UDP)
				break;
			if (l4 == IPPROTO_HOPOPTS || l4 == IPPROTO_ROUTING || l4 == IPPROTO_DSTOPTS) {
				if (h + 2 > end)
					return SROCE_BPF_PARSE_TRUNC_IP;
				len = ((uint32_t)h[1] + 1) * 8; /* RFC 8200 4.3: 8-octet units, minus the first */
			} else if (l4 == IPPROTO_FRAGMENT) {
				if (h + 8 > end)
					return SROCE_BPF_PARSE_TRUNC_IP;
				/* RFC 8200 4.5: offset (13 bits) and M flag; an atomic fragment
				 * (both zero) is a whole datagram. */
				if (sroce_get_be16(h + 2) & 0xfff9)
					return SROCE_BPF_PARSE_IP_FRAG;
				len = 8;
			} else if (l4 == IPPROTO_AH) {
				if (h + 2 > end)
					return SROCE_BPF_PARSE_TRUNC_IP;
				len = ((uint32_t)h[1] + 2) * 4; /* RFC 4302 2.2: 32-bit words, minus 2 */
			} else {
				return SROCE_BPF_PARSE_NOT_UDP; /* ESP, no next header, TCP, ... */
			}
			l4 = h[0];
			ext_len += len;
			off += len;
		}
		if (l4 != IPPROTO_UDP)
			return SROCE_BPF_PARSE_IPV6_EXT;
		if (f->ip_len < sizeof(*ip6) + ext_len + sizeof(struct udphdr))
			return SROCE_BPF_PARSE_TRUNC_IP;
	} else {
		return SROCE_BPF_PARSE_NOT_IP;
	}

	{
		/* off is bounded: 14 + 8 + 60 for IPv4, or 14 + 8 + 40 + 4 * 2048 for IPv6. */
		const struct udphdr *uh;

		off &= 0xffff;
		uh = (const struct udphdr *)(data + off);
		if ((const uint8_t *)(uh + 1) > end)
			return SROCE_BPF_PARSE_TRUNC_UDP;
		f->sport = bpf_ntohs(uh->source);
		f->dport = bpf_ntohs(uh->dest);
		f->udp_len = bpf_ntohs(uh->len);
		f->payload_off = off + sizeof(*uh);
	}
	return SROCE_BPF_PARSE_UDP;
}

/* --- opcode facts (IBA 9.2 table 38; the opcode enum is proto/roce.h's) --- */

static __always_inline bool sroce_bpf_is_rc(uint8_t opcode)
{
	return (opcode & SROCE_TRANSPORT_MASK) == SROCE_TRANSPORT_RC;
}

/* RC responses: RDMA READ responses, ACK, atomic ACK (0x0d .. 0x12). */
static __always_inline bool sroce_bpf_is_rc_response(uint8_t opcode)
{
	return sroce_bpf_is_rc(opcode) && opcode >= SROCE_OP_READ_RESP_FIRST &&
	       opcode <= SROCE_OP_ATOMIC_ACK;
}

/* Opcodes that carry an AETH right after the BTH (IBA 9.3.5; table 38). */
static __always_inline bool sroce_bpf_has_aeth(uint8_t opcode)
{
	return opcode == SROCE_OP_READ_RESP_FIRST || opcode == SROCE_OP_READ_RESP_LAST ||
	       opcode == SROCE_OP_READ_RESP_ONLY || opcode == SROCE_OP_ACK ||
	       opcode == SROCE_OP_ATOMIC_ACK;
}

/* Packets that consume a PSN of the sender's sequence (IBA 9.7.1): RC and UC
 * requests and RC read responses. ACKs and atomic ACKs repeat the PSN they
 * acknowledge (and are coalesced), UD does not check PSNs (IBA 9.7.7), a CNP's
 * PSN is meaningless (Annex A17.9.3). */
static __always_inline bool sroce_bpf_psn_sequenced(uint8_t opcode)
{
	uint8_t t = opcode & SROCE_TRANSPORT_MASK;

	if (t == SROCE_TRANSPORT_UC)
		return true;
	if (t != SROCE_TRANSPORT_RC)
		return false;
	return opcode != SROCE_OP_ACK && opcode != SROCE_OP_ATOMIC_ACK;
}

#endif /* SROCE_EBPF_ROCE_BPF_H */
