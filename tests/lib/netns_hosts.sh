# Shared by tests/e2e/hosts.sh and tests/dpdk/hosts.sh (sourced): stopping a
# host's sroced and removing both hosts. The caller defines $state (its state
# directory) and ns HOST (the host's network namespace name).

stop_daemon() {  # HOST SIGNAL: signal the daemon, wait up to 10 s, then SIGKILL
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 0
  kill "-$2" "$pid" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$state/$1.pid"
}

down() {
  for h in h1 h2; do stop_daemon "$h" TERM; done
  for h in h1 h2; do ip netns del "$(ns "$h")" 2>/dev/null; done
  return 0
}
