#!/usr/bin/python3
"""UD sends with a chosen GRH flow label, with pyverbs (perftest 4.5 has no --flow_label).

  ud_flowlabel.py recv QPN_FILE COUNT          post COUNT receives, write the QPN, print the
                                               flow label of each arriving GRH (IBA 11.4.1.1:
                                               a UD receive's first 40 bytes; over RoCEv2 the
                                               IPv6 header, Annex A17.4.5.1)
  ud_flowlabel.py send QPN_FILE COUNT DGID LABEL SGID_INDEX
"""
import ipaddress
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

QKEY = 0x11111111
SIZE = 256
GRH = 40


def poll(cq, count, secs=20):
    got, deadline = [], time.time() + secs
    while len(got) < count and time.time() < deadline:
        n, wcs = cq.poll(count - len(got))
        for wc in wcs:
            if wc.status != e.IBV_WC_SUCCESS:
                sys.exit(f"completion status {wc.status}")
            got.append(wc)
        if n == 0:
            time.sleep(0.001)
    return got


def main():
    role, qpn_file, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = Context(name="sroce0")
    pd = PD(ctx)
    cq = CQ(ctx, 2 * count)
    slot = GRH + SIZE
    mr = MR(pd, slot * count, e.IBV_ACCESS_LOCAL_WRITE)
    attr = QPAttr(port_num=1)
    attr.qkey = QKEY
    attr.pkey_index = 0
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=count, max_recv_wr=count)), attr)
    if role == "recv":
        for i in range(count):
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * slot, slot, mr.lkey)]))
        tmp = qpn_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(qp.qp_num))
        os.rename(tmp, qpn_file)
        wcs = poll(cq, count)
        labels = []
        for wc in wcs:
            grh = mr.read(GRH, wc.wr_id * slot)
            labels.append(((grh[1] & 0x0F) << 16) | (grh[2] << 8) | grh[3])
        print("received", len(wcs), "labels", " ".join(hex(x) for x in labels))
        sys.exit(0 if len(wcs) == count else 1)
    dgid, label, sgid_index = sys.argv[4], int(sys.argv[5], 0), int(sys.argv[6])
    for _ in range(400):
        if os.path.exists(qpn_file):
            break
        time.sleep(0.05)
    rqpn = int(open(qpn_file).read())
    gr = GlobalRoute(dgid=GID(ipaddress.IPv6Address(dgid).exploded), flow_label=label,
                     sgid_index=sgid_index, hop_limit=64)
    ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))
    mr.write(b"x" * SIZE, SIZE)
    for i in range(count):
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)])
        wr.set_wr_ud(ah, rqpn, QKEY)
        qp.post_send(wr)
        time.sleep(0.005)  # the receiver has every receive posted; this only spreads the sends
    wcs = poll(cq, count)
    print("sent", len(wcs), "to qpn", rqpn, "flow label", hex(label))
    sys.exit(0 if len(wcs) == count else 1)


if __name__ == "__main__":
    main()
