#!/usr/bin/env bash
# franka-sim pins numpy 1.26 and mujoco < 3.3, so it gets a venv of its own.
set -euo pipefail
python=$1 venv=$2
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip -q --disable-pip-version-check install franka-sim==1.1.7 franky-sim==1.0.4 \
  2>&1 | grep -v "^WARNING: Location" || true
[ -x "$venv/bin/run-franka-sim-server" ] || { echo "franka-sim install failed" >&2; exit 1; }
