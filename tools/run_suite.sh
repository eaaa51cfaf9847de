#!/usr/bin/env bash
# `make test`: the whole suite in two lanes at once.
#
# Why two: tests/algorithms/test_learning.py is ~8 minutes of single-threaded torch that starts no
# server, while most of the rest waits on real processes (franka-sim, ROS 2 nodes, Ray, sockets), so
# on a 2-core machine the learning lane fills the core the other lane leaves idle. Every
# timing-sensitive test already has to hold beside a busy core (CI runs on a shared machine;
# `cpu-cap --busy`), so running them beside the learning lane asks nothing new of them. The lanes
# share no port, ROS domain, Ray session or file: each is tools/run_tests.sh in its own process.
#
# Usage: tools/run_suite.sh PYTHON [pytest args for both lanes...]
set -uo pipefail
py=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
learning=tests/algorithms/test_learning.py
logdir=build/test-logs; mkdir -p "$logdir"
log=$logdir/learning-lane.log

echo "learning lane: $learning runs beside the rest (log: $log)"
# its own ROS domain too, though it starts no node: never the main lane's
# (and no pytest cache, which the main lane writes)
ROS_DOMAIN_ID=$(( ($$ % 100) + 1 )) bash "$here/run_tests.sh" "$py" "$learning" -p no:cacheprovider "$@" \
  >"$log" 2>&1 &
lane=$!
# Ctrl-C reaches the main lane's pytest directly (the foreground job: it tears its servers down); the
# learning lane, a background job, ignores SIGINT, so the trap stops it (it holds no server)
trap 'pkill -TERM -P $lane; kill $lane 2>/dev/null; exit 130' INT TERM
bash "$here/run_tests.sh" "$py" tests --ignore="$learning" "$@"
main_rc=$?

wait $lane
lane_rc=$?
trap - INT TERM
echo
echo "================================ learning lane ================================"
cat "$log"
echo "main lane rc=$main_rc, learning lane rc=$lane_rc"
[ $main_rc -eq 0 ] && [ $lane_rc -eq 0 ]
