# rdma-core's pyverbs suite on sroce0 of the module (sourced by vm_test.sh, which defines
# pass, fail, wait_for and IP). As tests/e2e/pyverbs.sh runs it under sroce-run, but on the
# real device: the real sroced --kernel on eth0, libsroce's kernel path, the kernel's
# rdma_cm for the rdma_cm tests (QP1 through sroced, loopback to 10.0.2.15).
#
# SROCE_VM_PYVERBS_* come from run.sh's environment through the kernel command line
# (the kernel hands unknown NAME=VALUE parameters to /init as environment). Prints
#   SUMMARY pyverbs: RAN run, PASSED passed, SKIPPED skipped, FAILED failed, ERRORS errors
# and fails the check on any failure or error.
pyverbs_main() {
	if ! command -v python3 >/dev/null || ! [ -e /test/pyverbs/run_tests.py ] || ! command -v sroced >/dev/null; then
		echo "SUMMARY pyverbs: skipped (python3, pyverbs or sroced not in the image)"
		return 0
	fi
	echo "== pyverbs (rdma-core's tests) on sroce0 through sroced's kernel path"
	budget=${SROCE_VM_PYVERBS_BUDGET:-120}
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
	# A few 2 MiB huge pages: the suite's huge-page tests skip without them.
	echo 8 >/proc/sys/vm/nr_hugepages 2>/dev/null
	t0=$(cut -d. -f1 /proc/uptime)
	# Everything but the rdma_cm tests, within the budget (SROCE_VM_PYVERBS_BUDGET seconds).
	# unittest takes module names: tests.test_X (the suite's __init__ makes `tests.` resolve).
	py_total_ran=0 py_total_passed=0 py_total_skipped=0 py_total_failed=0 py_total_errors=0
	py_rdmacm="not run (SROCE_VM_PYVERBS_RDMACM=0)"
	rest=""
	for f in /test/pyverbs/test_*.py; do
		m=${f##*/}
		m=${m%.py}
		case $m in test_rdmacm | test_mlx5_rdmacm) ;; *) rest="$rest tests.$m" ;; esac
	done
	# shellcheck disable=SC2086
	[ "$budget" -gt 0 ] && pyverbs_run rest "$budget" ${SROCE_VM_PYVERBS_TESTS:-$rest}
	# pyverbs' own rdma_cm tests (SROCE_VM_PYVERBS_RDMACM=0 on run.sh's environment leaves
	# them out): a passive and an active process forked from the runner connect through QP1
	# as the programs above do and exchange traffic on loopback; about 15 s.
	if [ "${SROCE_VM_PYVERBS_RDMACM:-1}" = 1 ]; then
		pyverbs_run rdmacm "${SROCE_VM_PYVERBS_RDMACM_BUDGET:-60}" tests.test_rdmacm
	fi
	t1=$(cut -d. -f1 /proc/uptime)
	kill -TERM "$SPY" 2>/dev/null
	wait "$SPY"
	[ "${SROCE_VM_PYVERBS_VERBOSE:-0}" = 1 ] && tail -n 60 /tmp/sroced.py.out | sed 's/^/    sroced: /'
	echo "SUMMARY pyverbs: $py_total_ran run, $py_total_passed passed, $py_total_skipped skipped, $py_total_failed failed, $py_total_errors errors ($((t1 - t0)) s; rdma_cm: $py_rdmacm)"
	if [ "$py_total_ran" -gt 0 ] && [ "$py_total_failed" = 0 ] && [ "$py_total_errors" = 0 ]; then
		pass "pyverbs: $py_total_passed passed, no failures or errors"
	else
		fail "pyverbs: $py_total_ran run, $py_total_failed failed, $py_total_errors errors"
	fi
}

# pyverbs_run LABEL BUDGET [unittest args]: one run of the suite; adds to the totals.
pyverbs_run() {
	label=$1 pb=$2
	shift 2
	pt0=$(cut -d. -f1 /proc/uptime)
	# -c: at the budget's SIGINT unittest finishes the running test and reports the counts.
	timeout -s INT -k 20 "$pb" python3 /test/pyverbs/run_tests.py --dev sroce0 --gid "$G" -v -c \
		"$@" >/tmp/pyverbs.$label.log 2>&1
	prc=$?
	log=/tmp/pyverbs.$label.log
	ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' $log | tail -n1)
	last=$(grep -E "^(OK|FAILED)" $log | tail -n1)
	num() { echo "$last" | grep -oE "$1=[0-9]+" | cut -d= -f2; }
	failed=$(num failures)
	errors=$(num errors)
	skipped=$(num skipped)
	ran=${ran:-0} failed=${failed:-0} errors=${errors:-0} skipped=${skipped:-0}
	passed=$((ran - failed - errors - skipped))
	if [ -z "$last" ]; then
		echo "    pyverbs $label: no result (rc $prc)"
		tail -n 20 $log | sed 's/^/    /'
		errors=$((errors + 1)) passed=0
	fi
	[ $(($(cut -d. -f1 /proc/uptime) - pt0)) -ge $((pb - 1)) ] &&
		echo "    pyverbs $label: stopped by its ${pb} s budget: the counts are of the tests that ran"
	echo "    pyverbs $label: $ran run, $passed passed, $skipped skipped, $failed failed, $errors errors (rc $prc)"
	if [ "$label" = rdmacm ]; then
		py_rdmacm="$passed of $ran passed, $skipped skipped"
		# (the tests fork a passive and an active side: their prints interleave)
		grep -E "test_rdmacm" $log | sed 's/(tests\.test_rdmacm\.CMTestCase\.[a-z_]*) //; s/^/    /'
	fi
	py_total_ran=$((py_total_ran + ran))
	py_total_passed=$((py_total_passed + passed))
	py_total_skipped=$((py_total_skipped + skipped))
	py_total_failed=$((py_total_failed + failed))
	py_total_errors=$((py_total_errors + errors))
	grep -E " \.\.\. (FAIL|ERROR)" $log | sed 's/^/    /'
	# Why tests were skipped, grouped (docs/kmod.md lists them and why each is true of sroce).
	echo "    pyverbs $label: skip reasons (count, reason):"
	sed -n "s/.* \.\.\. skipped '\(.*\)'$/\1/p" $log | sort | uniq -c | sort -rn | sed 's/^/      /'
	[ "${SROCE_VM_PYVERBS_VERBOSE:-0}" = 1 ] && sed 's/^/    | /' $log
	[ "$failed" = 0 ] && [ "$errors" = 0 ] ||
		grep -E "^(FAIL|ERROR):" -A14 $log | head -n 80 | sed 's/^/    /'
}

pyverbs_main
