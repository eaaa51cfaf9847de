#!/usr/bin/env bash
# GPU check for the simulator adapters that need an accelerator: on a GPU node, install each
# simulator in its own venv, run one rollout of each through sim.make(...) and print steps/s.
#
#   bash benchmarks/gpu_check.sh            # all of them
#   ONLY=isaaclab bash benchmarks/gpu_check.sh
#
# Needs: an NVIDIA GPU + driver, python3.12 (Isaac Lab 3 / Isaac Sim 6, ManiSkill GPU) and python3.11
# (the RoboTwin runtime supports 3.10-3.11 only), package-registry access (or PIP_FIND_LINKS to a
# wheelhouse), and for RoboTwin its assets (ROBOTWIN_ASSETS=<dir>, else `robotwin-download-assets`
# fetches ~16 GB). Each simulator is checked on its own: one failing does not stop the others.
# Output: one `GPU_CHECK <env> ...` line per simulator (status ok|fail|skip, steps/s), then a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
WORK=${GPU_CHECK_DIR:-$ROOT/build/gpu_check}
NUM_ENVS=${NUM_ENVS:-256}
STEPS=${STEPS:-200}
ONLY=${ONLY:-}
ISAACLAB_SPEC=${ISAACLAB_SPEC:-"isaaclab[isaacsim,all]>=2.2"}
MANISKILL_SPEC=${MANISKILL_SPEC:-"mani-skill>=3.0.1,<3.1"}
ROBOTWIN_SPEC=${ROBOTWIN_SPEC:-"rlinf-robotwin-runtime==0.1.1"}
export OMNI_KIT_ACCEPT_EULA=YES ACCEPT_EULA=Y MS_SKIP_ASSET_DOWNLOAD_PROMPT=1 PYTHONUNBUFFERED=1
mkdir -p "$WORK"
declare -a SUMMARY=()

log() { printf '[gpu_check] %s\n' "$*" >&2; }
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
record() { SUMMARY+=("$1"); echo "$1"; }

# make_venv NAME PYTHON -> path of the venv's python (created once, reused)
make_venv() {
  local name=$1 py=$2 dir="$WORK/venv-$1"
  if ! command -v "$py" >/dev/null; then log "$py not found"; return 1; fi
  [ -x "$dir/bin/python" ] || "$py" -m venv "$dir" || return 1
  "$dir/bin/python" -m pip -q install --upgrade pip wheel >&2 || return 1
  # Our package without its dependency resolution: the simulator's own pins must win in its venv.
  "$dir/bin/python" -m pip -q install --no-deps -e "$ROOT" >&2 || return 1
  "$dir/bin/python" -m pip -q install "numpy" "msgspec>=0.18" "pyyaml>=6" >&2 || return 1
  echo "$dir/bin/python"
}

# rollout PYTHON ENV [--opt k=v ...] -> prints the GPU_CHECK line
rollout() {
  local py=$1 env=$2; shift 2
  local out
  if out=$(timeout "${ROLLOUT_TIMEOUT:-1800}" "$py" "$ROOT/tools/env_rollout.py" "$env" \
        --num-envs "$NUM_ENVS" --steps "$STEPS" "$@" 2>"$WORK/${env//\//_}.log" | grep '^ROLLOUT'); then
    record "GPU_CHECK $env status=ok ${out#ROLLOUT $env }"
  else
    record "GPU_CHECK $env status=fail log=$WORK/${env//\//_}.log"
    tail -n 20 "$WORK/${env//\//_}.log" >&2
  fi
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  log "no NVIDIA GPU visible: nothing to check"
  echo "GPU_CHECK summary: skipped (no GPU)"
  exit 0
fi
nvidia-smi -L >&2
GPU_KIND=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)

# --- Isaac Lab (Python 3.12): Franka lift and reach, vectorized on the GPU ---------------------
if want isaaclab; then
  if py=$(make_venv isaaclab "${PYTHON312:-python3.12}"); then
    log "installing $ISAACLAB_SPEC (several GB, first time only)"
    if "$py" -m pip -q install "$ISAACLAB_SPEC" --extra-index-url https://pypi.nvidia.com >&2; then
      rollout "$py" isaaclab/franka-lift --opt device=cuda:0
      rollout "$py" isaaclab/franka-reach --opt device=cuda:0 --opt action_mode=joint_delta
    else
      record "GPU_CHECK isaaclab/* status=fail reason=install"
    fi
  else
    record "GPU_CHECK isaaclab/* status=skip reason=no-python3.12"
  fi
fi

# --- ManiSkill3 on PhysX GPU (same Python 3.12 venv kind, its own venv) -----------------------
if want maniskill; then
  if py=$(make_venv maniskill "${PYTHON312:-python3.12}"); then
    if "$py" -m pip -q install "$MANISKILL_SPEC" >&2; then
      rollout "$py" maniskill/pick-cube --opt backend=gpu
      rollout "$py" maniskill/push-cube --opt backend=gpu --opt image_size=128
    else
      record "GPU_CHECK maniskill/* status=fail reason=install"
    fi
  else
    record "GPU_CHECK maniskill/* status=skip reason=no-python3.12"
  fi
fi

# --- RoboTwin 2.0 runtime (Python 3.11, torch 2.7.1 pinned by the runtime) --------------------
if want robotwin; then
  if py=$(make_venv robotwin "${PYTHON311:-python3.11}"); then
    if "$py" -m pip -q install "$ROBOTWIN_SPEC" >&2; then
      assets=${ROBOTWIN_ASSETS:-$WORK/robotwin_assets}
      if [ ! -d "$assets" ] || [ -z "$(ls -A "$assets" 2>/dev/null)" ]; then
        log "downloading RoboTwin assets into $assets"
        "$(dirname "$py")/robotwin-download-assets" --output "$assets" >&2 || log "asset download failed"
      fi
      # RoboTwin runs one subprocess per env: fewer envs than the GPU-batched simulators.
      NUM_ENVS=${ROBOTWIN_ENVS:-8} rollout "$py" robotwin/click-bell --opt "assets_path=$assets"
    else
      record "GPU_CHECK robotwin/* status=fail reason=install"
    fi
  else
    record "GPU_CHECK robotwin/* status=skip reason=no-python3.11"
  fi
fi

# --- Reference: the embedded MuJoCo env on this node's CPUs ------------------------------------
if want mujoco && [ -x "$ROOT/.venv/bin/python" ]; then
  NUM_ENVS=64 rollout "$ROOT/.venv/bin/python" mujoco/fr3-reach
fi

echo "GPU_CHECK summary on ${GPU_KIND}: ${#SUMMARY[@]} checks"
printf '  %s\n' "${SUMMARY[@]}"
