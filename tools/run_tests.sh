#!/usr/bin/env bash
# Run the test suite with an isolated ROS 2 domain, log dir and render settings.
set -uo pipefail
py=$1; shift
export MUJOCO_GL=${MUJOCO_GL:-osmesa} PYOPENGL_PLATFORM=${PYOPENGL_PLATFORM:-osmesa}
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 WANDB_MODE=offline HF_HUB_OFFLINE=1
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST FASTDDS_BUILTIN_TRANSPORTS=UDPv4
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( ($$ % 100) + 100 ))}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export ROS_LOG_DIR=$tmp/ros_log MESA_SHADER_CACHE_DIR=$tmp/mesa
"$py" -m pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "ERROR: pytest collected no tests (exit 5) - the suite must never be empty" >&2
  exit 1
fi
exit $rc
