# Sourced by vm_test.sh: the module under a slow or stopped sroced (docs/security.md,
# "The kernel module"). kmock --slow answers one request after the module gave up on
# it; kverbs checks that nothing was left behind. call_timeout_ms is 2000 here.

echo "== a slow daemon: a HELLO answered after its timeout"
start_kmock --dev sroce0 --slow hello:3500 --log /tmp/kmock.slow.log
run_checks kverbs latehello sroce0 3
expect "kmock (playing sroced) still runs" kill -0 "$KMOCK"
stop_kmock >/dev/null
grep -q "slow: op 1 answered" /tmp/kmock.slow.log && pass "the HELLO was answered late" ||
	fail "kmock did not stall the HELLO"

echo "== a slow daemon: DEREG_MR given up, the daemon then touches the MR"
start_kmock --dev sroce0 --slow dereg:3500 --log /tmp/kmock.slow.log
run_checks kverbs latedereg sroce0 3
expect "kmock survived touching the released MR (no SIGBUS)" kill -0 "$KMOCK"
stop_kmock >/dev/null
[ "$(summary_field late_touched)" = 1 ] && pass "kmock read and wrote the MR after the module let go" ||
	fail "late_touched $(summary_field late_touched)"
[ "$(summary_field left_at_close)" = 0 ] && pass "the given-up DEREG still reached the daemon" ||
	fail "left_at_close $(summary_field left_at_close)"

echo "== a slow daemon: a program killed in DEREG_MR"
echo 30000 >/sys/module/rdma_sroce/parameters/call_timeout_ms
start_kmock --dev sroce0 --slow dereg:9000 --log /tmp/kmock.slow.log
run_checks kverbs killdestroy sroce0 5
# kmock wakes, touches the MR the dead program had, then handles its DEREG and CLOSE.
expect "kmock handled the dead program's DEREG_MR" wait_for 20 grep -q "close dev=0" /tmp/kmock.slow.log
expect "kmock survived (no SIGBUS)" kill -0 "$KMOCK"
run_checks kverbs objects
stop_kmock >/dev/null
echo 2000 >/sys/module/rdma_sroce/parameters/call_timeout_ms
