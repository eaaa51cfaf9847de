#!/usr/bin/env bash
# Build ros_ws with colcon from the main venv (the installed node scripts get that venv's Python).
set -euo pipefail
venv=$(cd "$1" && pwd)
cd ros_ws
PATH="$venv/bin:$PATH" "$venv/bin/colcon" --log-base log build --base-paths src \
  --build-base build --install-base install 2>&1 | tail -n 5
