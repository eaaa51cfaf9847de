#!/usr/bin/env bash
# A venv of its own holding LeRobot's dataset reader, for tests/data/test_lerobot_reader.py (which
# skips without it). It never touches .venv: LeRobot pins an older torch (and lerobot >= 0.5 needs
# Python 3.12), so lerobot 0.4.4 (the LeRobotDataset v3.0 reader) goes in --no-deps with just what
# its reader imports, and borrows .venv's CPU torch read-only through a .pth appended to sys.path.
# torchvision from PyPI is a CUDA build whose compiled ops cannot load against CPU torch: its _C.so
# is set aside and its meta registrations emptied (the reader uses only its Python transforms).
#   bash tools/lerobot_reader_venv.sh [VENV=build/lerobot-venv] [MAIN_VENV=.venv]   (make setup runs it)
set -euo pipefail
venv=$(realpath -m "${1:-build/lerobot-venv}")
main=$(cd "${2:-.venv}" && pwd)
python=${PYTHON:-python3.11}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
"${pip[@]}" install --no-deps lerobot==0.4.4
"${pip[@]}" install "datasets>=4,<4.2" "huggingface-hub>=0.34.2,<0.36" "packaging>=24.2,<26" draccus==0.10.0 \
  jsonlines termcolor deepdiff einops
"${pip[@]}" install --no-deps "accelerate>=1.10,<2" psutil safetensors "av>=15" torchvision==0.28.0
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
main_site=$("$main/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "import sys; sys.path.append('$main_site')" > "$site/zz_main_venv_torch.pth"
if [ -f "$site/torchvision/_C.so" ]; then
  mv "$site/torchvision/_C.so" "$site/torchvision/_C.so.cuda-build"
  echo '"""Emptied: the compiled ops of this CUDA build cannot load against CPU torch."""' \
    > "$site/torchvision/_meta_registrations.py"
fi
(cd /tmp && "$venv/bin/python" -c "import lerobot.datasets.lerobot_dataset; print('LeRobot reader venv ready:', '$venv')")
