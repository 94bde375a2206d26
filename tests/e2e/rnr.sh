#!/bin/bash
# rnr.sh STATE_DIR PORT SECONDS SERVER_CMD... -- CLIENT_CMD...
# pair.sh, then the RNR NAKs the pair must have caused (sroce-datacheck --late-recv: the
# server on h1 posts its receives late, or never): h1's sroced, the responder, sent RNR NAKs
# and h2's, the requester, received them (`sroce status --json`, engine counters).
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
bin=$(cat "$state/bindir")
rnr() {  # HOST sent|received
  "$bin/sroce" status --json --socket "$state/$1.sock" |
    python3 -c "import json, sys; print(json.load(sys.stdin)['engine']['rnr_naks_$2'])"
}
s0=$(rnr h1 sent) && r0=$(rnr h2 received) || { echo "rnr.sh: cannot read the counters" >&2; exit 1; }
"$here/pair.sh" "$@" || exit 1
s1=$(rnr h1 sent) && r1=$(rnr h2 received) || { echo "rnr.sh: cannot read the counters" >&2; exit 1; }
echo "rnr.sh: h1 rnr_naks_sent +$((s1 - s0)), h2 rnr_naks_received +$((r1 - r0))"
if [ $((s1 - s0)) -le 0 ] || [ $((r1 - r0)) -le 0 ]; then
  echo "rnr.sh: FAIL: no RNR NAK went from h1 to h2" >&2
  exit 1
fi
