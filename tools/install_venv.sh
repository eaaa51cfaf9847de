#!/usr/bin/env bash
# Create the main venv and install the project with every extra a developer machine uses.
set -euo pipefail
python=$1 venv=$2
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
"${pip[@]}" install --upgrade pip wheel 2>&1 | grep -v "^WARNING: Location" || true
# torch is pinned to the CPU wheel (torch==2.13.0); see pyproject.toml.
"${pip[@]}" install -e '.[robot,ros,sim,calibration,learn,dev,maniskill]' 2>&1 | grep -v "^WARNING: Location" || true
# mani-skill's sapien declares opencv-python (the GUI build), whose cv2 would shadow the headless one:
# drop it and restore opencv-python-headless's files (same version, no dependency changes).
if "$venv/bin/python" -m pip show -q opencv-python >/dev/null 2>&1; then
  "${pip[@]}" uninstall -y opencv-python 2>&1 | grep -v "^WARNING" || true
  cv=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('opencv-python-headless'))")
  "${pip[@]}" install --force-reinstall --no-deps "opencv-python-headless==$cv" 2>&1 | grep -v "^WARNING: Location" || true
fi
"$venv/bin/python" -c "import rlinf_robot, franky, zmq, msgspec, mujoco, torch, ray, rclpy, cv2, sapien" \
  || { echo "install_venv: the main venv is incomplete" >&2; exit 1; }
# FR3 model files only: franky-sim's own dependencies (numpy<2 pins, etc.) stay out of this venv.
"${pip[@]}" install --no-deps franky-sim==1.0.4 2>&1 | grep -v "^WARNING: Location" || true
# openpi's remote-inference client (the bridge benchmark's reference, the openpi_remote policy). It
# declares numpy<2, which is wrong in practice; its real requirements are in the `learn` extra.
"${pip[@]}" install --no-deps openpi-client==0.1.2 2>&1 | grep -v "^WARNING: Location" || true
