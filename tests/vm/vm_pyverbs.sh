# rdma-core's pyverbs suite on sroce0 of the module (sourced by vm_test.sh, which defines
# pass, fail, wait_for and IP). As tests/e2e/pyverbs.sh runs it under sroce-run, but on the
# real device: the real sroced --kernel on eth0, libsroce's kernel path, the kernel's
# rdma_cm for the rdma_cm tests (QP1 through sroced, loopback to 10.0.2.15).
#
# SROCE_VM_PYVERBS_TESTS (kernel command line is not used: set in the image) picks the
# tests; by default the whole suite under a time budget of PYVERBS_BUDGET seconds. Prints
#   SUMMARY pyverbs: RAN run, PASSED passed, SKIPPED skipped, FAILED failed, ERRORS errors
# and fails the check on any failure or error.
pyverbs_main() {
	if ! command -v python3 >/dev/null || ! [ -e /test/pyverbs/run_tests.py ] || ! command -v sroced >/dev/null; then
		echo "SUMMARY pyverbs: skipped (python3, pyverbs or sroced not in the image)"
		return 0
	fi
	echo "== pyverbs (rdma-core's tests) on sroce0 through sroced's kernel path"
	budget=${PYVERBS_BUDGET:-90}
	sroced --netdev eth0 --kernel --log-level warn >/tmp/sroced.py.out 2>&1 &
	SPY=$!
	if ! wait_for 30 sh -c '[ "$(cat /sys/class/infiniband/sroce0/ports/1/state)" = "4: ACTIVE" ]'; then
		fail "sroced --kernel for pyverbs did not attach"
		sed 's/^/    sroced: /' /tmp/sroced.py.out
		kill -TERM "$SPY" 2>/dev/null
		wait "$SPY"
		return 0
	fi
	# The GID sroced sends from (the IPv4 one): pyverbs otherwise picks any index, and
	# sroced serves IPv4 GIDs only (docs/kmod.md, "QP1 in sroced").
	G=""
	for g in /sys/class/infiniband/sroce0/ports/1/gids/*; do
		grep -q "0000:0000:0000:0000:0000:ffff:0a00:020f" "$g" && G=${g##*/} && break
	done
	t0=$(cut -d. -f1 /proc/uptime)
	# shellcheck disable=SC2086
	# -c: at the budget's SIGINT unittest finishes the running test and reports the counts.
	timeout -s INT -k 20 "$budget" python3 /test/pyverbs/run_tests.py --dev sroce0 --gid "$G" -v -c \
		${SROCE_VM_PYVERBS_TESTS:-} >/tmp/pyverbs.log 2>&1
	rc=$?
	t1=$(cut -d. -f1 /proc/uptime)
	kill -TERM "$SPY" 2>/dev/null
	wait "$SPY"
	ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' /tmp/pyverbs.log | tail -n1)
	last=$(grep -E "^(OK|FAILED)" /tmp/pyverbs.log | tail -n1)
	num() { echo "$last" | grep -oE "$1=[0-9]+" | cut -d= -f2; }
	failed=$(num failures)
	errors=$(num errors)
	skipped=$(num skipped)
	ran=${ran:-0} failed=${failed:-0} errors=${errors:-0} skipped=${skipped:-0}
	# Stopped by the budget: count what the verbose log shows.
	if [ -z "$last" ]; then
		ran=$(grep -cE " \.\.\. (ok|skipped|FAIL|ERROR)" /tmp/pyverbs.log)
		skipped=$(grep -cE " \.\.\. skipped" /tmp/pyverbs.log)
		failed=$(grep -cE " \.\.\. FAIL" /tmp/pyverbs.log)
		errors=$(grep -cE " \.\.\. ERROR" /tmp/pyverbs.log)
		echo "    pyverbs: stopped by the ${budget} s budget (rc $rc): counts of the tests that ran"
	fi
	passed=$((ran - failed - errors - skipped))
	# The rdma_cm tests fork a passive and an active side whose prints interleave with
	# unittest's: show their part of the log whole.
	sed -n '/test_rdmacm_async_ex_leave/,/^test_[a-z_]* (tests\.test_[^r]/p' /tmp/pyverbs.log | head -n 60 | sed 's/^/    /'
	grep -E " \.\.\. (FAIL|ERROR)" /tmp/pyverbs.log | sed 's/^/    /'
	echo "SUMMARY pyverbs: $ran run, $passed passed, $skipped skipped, $failed failed, $errors errors ($((t1 - t0)) s)"
	if [ "$ran" -gt 0 ] && [ "$failed" = 0 ] && [ "$errors" = 0 ]; then
		pass "pyverbs: $passed passed, no failures or errors"
	else
		fail "pyverbs: $ran run, $failed failed, $errors errors (rc $rc)"
		grep -E "^(FAIL|ERROR):" -A12 /tmp/pyverbs.log | head -n 60 | sed 's/^/    /'
		tail -n 5 /tmp/pyverbs.log | sed 's/^/    /'
	fi
}

pyverbs_main
