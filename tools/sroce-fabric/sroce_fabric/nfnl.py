"""Minimal nfnetlink: the nf_tables messages that install "packets arriving on
interface X go to NFQUEUE n" in one namespace, and the nfnetlink_queue
messages of the delay line. iptables/nft binaries are not installed here, and
the kernel has nf_tables but not its native queue expression (CONFIG_NFT_QUEUE
is off), so the rule uses nft_compat with the xtables NFQUEUE target
(xt_NFQ_info_v3), which the kernel does have.

Message layouts: include/uapi/linux/netfilter/{nfnetlink.h, nf_tables.h,
nfnetlink_queue.h, xt_NFQUEUE.h}."""

from __future__ import annotations

import errno
import os
import socket
import struct

NETLINK_NETFILTER = 12
NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE = 0x1, 0x4, 0x400
NLMSG_ERROR = 2
NLA_F_NESTED = 0x8000
NFNETLINK_V0 = 0
NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END = 0x10, 0x11
NFNL_SUBSYS_QUEUE, NFNL_SUBSYS_NFTABLES = 3, 10
NFPROTO_IPV4 = 2
NF_ACCEPT = 1
NF_INET_PRE_ROUTING = 0

# nf_tables messages and attributes
NFT_MSG_NEWTABLE, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE = 0, 2, 3, 6
NFTA_TABLE_NAME = 1
NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, NFTA_CHAIN_HOOK, NFTA_CHAIN_POLICY, NFTA_CHAIN_TYPE = 1, 3, 4, 5, 7
NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY = 1, 2
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS = 1, 2, 4
NFTA_LIST_ELEM = 1
NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 2
NFTA_META_DREG, NFTA_META_KEY = 1, 2
NFT_META_IIF = 4
NFTA_CMP_SREG, NFTA_CMP_OP, NFTA_CMP_DATA = 1, 2, 3
NFT_CMP_EQ = 0
NFTA_DATA_VALUE = 1
NFT_REG_1 = 1
NFTA_TARGET_NAME, NFTA_TARGET_REV, NFTA_TARGET_INFO = 1, 2, 3
NFQ_FLAG_BYPASS = 0x01

# nfnetlink_queue
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 1, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_TIMESTAMP = 1, 2, 4
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 1 << 2


def attr(typ: int, payload: bytes) -> bytes:
    a = struct.pack("=HH", 4 + len(payload), typ) + payload
    return a + b"\0" * (-len(a) % 4)


def nested(typ: int, *attrs: bytes) -> bytes:
    return attr(typ | NLA_F_NESTED, b"".join(attrs))


def strz(s: str) -> bytes:
    return s.encode() + b"\0"


def be32(v: int) -> bytes:
    return struct.pack(">I", v & 0xFFFFFFFF)


def be16(v: int) -> bytes:
    return struct.pack(">H", v)


def message(msg_type: int, flags: int, seq: int, family: int, res_id: int, body: bytes) -> bytes:
    nfgen = struct.pack("=BBH", family, NFNETLINK_V0, socket.htons(res_id))
    payload = nfgen + body
    return struct.pack("=IHHII", 16 + len(payload), msg_type, flags, seq, 0) + payload


def parse_attrs(buf: bytes, off: int, end: int) -> dict[int, bytes]:
    out = {}
    while off + 4 <= end:
        ln, typ = struct.unpack_from("=HH", buf, off)
        if ln < 4:
            break
        out[typ & 0x3FFF] = buf[off + 4:off + ln]
        off += (ln + 3) & ~3
    return out


class NfnlSocket:
    def __init__(self, rcvbuf: int = 0):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        if rcvbuf:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf)  # SO_RCVBUFFORCE
            except OSError:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind((0, 0))
        self.seq = 1

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def close(self) -> None:
        self.sock.close()

    def fileno(self) -> int:
        return self.sock.fileno()

    def transact(self, msgs: list[bytes], seqs: list[int], ignore: tuple[int, ...] = ()) -> None:
        """Sends messages that all asked for an ACK; raises on the first error."""
        self.sock.send(b"".join(msgs))
        pending = set(seqs)
        while pending:
            data = self.sock.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, typ, _flags, seq, _pid = struct.unpack_from("=IHHII", data, off)
                if typ == NLMSG_ERROR:
                    err = -struct.unpack_from("=i", data, off + 16)[0]
                    pending.discard(seq)
                    if err and err not in ignore:
                        raise OSError(err, f"nfnetlink: {os.strerror(err)}")
                off += (ln + 3) & ~3


# --- nf_tables: the queue rules -------------------------------------------------

def _nft(sock: NfnlSocket, body_msgs: list[tuple[int, int, bytes]],
         ignore: tuple[int, ...] = ()) -> None:
    """One nf_tables transaction: BATCH_BEGIN, messages, BATCH_END."""
    msgs, seqs = [], []
    msgs.append(message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, sock.next_seq(), 0,
                        NFNL_SUBSYS_NFTABLES, b""))
    for mtype, flags, body in body_msgs:
        seq = sock.next_seq()
        msgs.append(message((NFNL_SUBSYS_NFTABLES << 8) | mtype,
                            NLM_F_REQUEST | NLM_F_ACK | flags, seq, NFPROTO_IPV4, 0, body))
        seqs.append(seq)
    msgs.append(message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, sock.next_seq(), 0,
                        NFNL_SUBSYS_NFTABLES, b""))
    sock.transact(msgs, seqs, ignore)


def delete_table(sock: NfnlSocket, table: str) -> None:
    _nft(sock, [(NFT_MSG_DELTABLE, 0, attr(NFTA_TABLE_NAME, strz(table)))],
         ignore=(errno.ENOENT,))


def install_queue_rules(sock: NfnlSocket, table: str, rules: list[tuple[int, int]],
                        priority: int = -400) -> None:
    """Table `table` (family ip) with a prerouting base chain and one rule per
    (ifindex, queue): `meta iif == ifindex -> NFQUEUE num queue bypass`.
    Prerouting, before routing, so the delay holds forwarded and local
    packets alike; bypass, so packets pass undelayed if the delay line dies."""
    chain = "prerouting"
    body = [
        (NFT_MSG_NEWTABLE, NLM_F_CREATE, attr(NFTA_TABLE_NAME, strz(table))),
        (NFT_MSG_NEWCHAIN, NLM_F_CREATE,
         attr(NFTA_CHAIN_TABLE, strz(table)) + attr(NFTA_CHAIN_NAME, strz(chain))
         + nested(NFTA_CHAIN_HOOK, attr(NFTA_HOOK_HOOKNUM, be32(NF_INET_PRE_ROUTING)),
                  attr(NFTA_HOOK_PRIORITY, be32(priority)))
         + attr(NFTA_CHAIN_POLICY, be32(NF_ACCEPT)) + attr(NFTA_CHAIN_TYPE, strz("filter"))),
    ]
    for ifindex, queue in rules:
        meta = nested(NFTA_LIST_ELEM, attr(NFTA_EXPR_NAME, strz("meta")),
                      nested(NFTA_EXPR_DATA, attr(NFTA_META_DREG, be32(NFT_REG_1)),
                             attr(NFTA_META_KEY, be32(NFT_META_IIF))))
        cmp_ = nested(NFTA_LIST_ELEM, attr(NFTA_EXPR_NAME, strz("cmp")),
                      nested(NFTA_EXPR_DATA, attr(NFTA_CMP_SREG, be32(NFT_REG_1)),
                             attr(NFTA_CMP_OP, be32(NFT_CMP_EQ)),
                             nested(NFTA_CMP_DATA,
                                    attr(NFTA_DATA_VALUE, struct.pack("=I", ifindex)))))
        # struct xt_NFQ_info_v3 { __u16 queuenum, queues_total, flags; } padded to 8.
        info = struct.pack("=HHHH", queue, 1, NFQ_FLAG_BYPASS, 0)
        target = nested(NFTA_LIST_ELEM, attr(NFTA_EXPR_NAME, strz("target")),
                        nested(NFTA_EXPR_DATA, attr(NFTA_TARGET_NAME, strz("NFQUEUE")),
                               attr(NFTA_TARGET_REV, be32(3)), attr(NFTA_TARGET_INFO, info)))
        body.append((NFT_MSG_NEWRULE, NLM_F_CREATE,
                     attr(NFTA_RULE_TABLE, strz(table)) + attr(NFTA_RULE_CHAIN, strz(chain))
                     + nested(NFTA_RULE_EXPRESSIONS, meta, cmp_, target)))
    _nft(sock, body)


# --- nfnetlink_queue ------------------------------------------------------------

def queue_bind(sock: NfnlSocket, queue: int, maxlen: int) -> None:
    """Binds `queue`, metadata only (the verdict needs no payload), GSO
    batches whole (no segmentation on the way to user space)."""
    mt = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG
    s1, s2 = sock.next_seq(), sock.next_seq()
    bind = message(mt, NLM_F_REQUEST | NLM_F_ACK, s1, 0, queue,
                   attr(NFQA_CFG_CMD, struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, 0)))
    params = message(mt, NLM_F_REQUEST | NLM_F_ACK, s2, 0, queue,
                     attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META))
                     + attr(NFQA_CFG_QUEUE_MAXLEN, be32(maxlen))
                     + attr(NFQA_CFG_MASK, be32(NFQA_CFG_F_GSO))
                     + attr(NFQA_CFG_FLAGS, be32(NFQA_CFG_F_GSO)))
    sock.transact([bind, params], [s1, s2])


def verdict_batch(queue: int, last_id: int, seq: int) -> bytes:
    """Accept every queued packet with id <= last_id (NFQNL_MSG_VERDICT_BATCH)."""
    return message((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT_BATCH, NLM_F_REQUEST, seq, 0,
                   queue, attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, last_id)))


def parse_packets(data: bytes):
    """Yields (queue, packet_id, arrival) for each NFQNL_MSG_PACKET in a recv
    buffer; arrival is the kernel's receive timestamp in CLOCK_REALTIME
    seconds (NFQA_TIMESTAMP), or None when the skb carries none."""
    off = 0
    pkt_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
    while off + 20 <= len(data):
        ln, typ = struct.unpack_from("=IH", data, off)
        if ln < 16:
            break
        if typ == pkt_type:
            queue = socket.ntohs(struct.unpack_from("=H", data, off + 18)[0])
            attrs = parse_attrs(data, off + 20, off + ln)
            hdr = attrs.get(NFQA_PACKET_HDR)
            ts = attrs.get(NFQA_TIMESTAMP)
            arrival = None
            if ts and len(ts) >= 16:
                sec, usec = struct.unpack_from(">QQ", ts, 0)
                arrival = sec + usec * 1e-6
            if hdr:
                yield queue, struct.unpack_from(">I", hdr, 0)[0], arrival
        off += (ln + 3) & ~3
