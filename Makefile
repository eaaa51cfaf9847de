# rlinf-robot: two commands for users (`make demo`, `make test`), the rest for developers.
# Setup is stamp-driven and idempotent: a second run does nothing and takes seconds.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
FSIM_VENV := .venv-franka-sim
PY := $(VENV)/bin/python
STAMPS := build/stamps
FR3_WRAPPER := build/fr3/fr3_wrapper.xml
ROS_SRC := $(shell find ros_ws/src -type f -not -path '*/__pycache__/*' 2>/dev/null)
# Debian packages: OSMesa for CPU rendering of MuJoCo camera observations; Chromium to check that a
# run's report.html renders (tests/integration/test_hybrid.py).
APT_PACKAGES := libosmesa6 chromium nftables

export MUJOCO_GL ?= osmesa
export PYOPENGL_PLATFORM ?= osmesa
export RAY_AUTH_MODE ?= disabled

.PHONY: setup demo test test-fast bench lint format clean help
.DEFAULT_GOAL := help

help:
	@echo "make demo   - set up, then run the main job on the embedded default"
	@echo "make test   - set up, then run the whole test suite"
	@echo "make setup  - create .venv, .venv-franka-sim, the FR3 MJCF wrapper, build ros_ws"
	@echo "make bench  - run every benchmark in benchmarks/ (each ends with a RESULT line)"
	@echo "make lint   - ruff (lint and format check), the import layers (import-linter), mypy on the robot-PC side"
	@echo "make format - ruff format, then ruff's import sorting"

setup: $(STAMPS)/apt $(STAMPS)/venv $(STAMPS)/franka-sim $(FR3_WRAPPER) $(STAMPS)/ros_ws $(STAMPS)/lerobot-reader

$(STAMPS)/apt: Makefile
	@bash tools/ensure_apt.sh $(APT_PACKAGES)
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/venv: pyproject.toml tools/install_venv.sh
	@bash tools/install_venv.sh $(PYTHON) $(VENV)
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/franka-sim: tools/install_franka_sim.sh
	@bash tools/install_franka_sim.sh $(PYTHON) $(FSIM_VENV)
	@mkdir -p $(STAMPS) && touch $@

$(FR3_WRAPPER): $(STAMPS)/venv $(STAMPS)/franka-sim
	@$(PY) -c "from rlinf_robot.robot.franka.mjcf import write_fr3_wrapper; print('FR3 MJCF wrapper:', write_fr3_wrapper())"
	@touch $@

# LeRobot's own dataset reader, apart from .venv (it pins an older torch): tests/data check that it
# loads the datasets we record (~30 s once).
$(STAMPS)/lerobot-reader: $(STAMPS)/venv tools/lerobot_reader_venv.sh
	@PYTHON=$(PYTHON) bash tools/lerobot_reader_venv.sh build/lerobot-venv $(VENV)
	@mkdir -p $(STAMPS) && touch $@

# colcon build of the ROS 2 workspace (only once the package exists).
$(STAMPS)/ros_ws: $(STAMPS)/venv $(ROS_SRC)
	@if [ -d ros_ws/src ]; then bash tools/build_ros_ws.sh $(VENV); fi
	@mkdir -p $(STAMPS) && touch $@

demo: setup
	@$(VENV)/bin/rlinf-robot demo

test: setup
	@bash tools/run_suite.sh $(PY) --durations=25

test-fast: setup
	@bash tools/run_tests.sh $(PY) -m "not slow"

bench: setup
	@set -e; for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b; done

LINT_PATHS := rlinf_robot sim policies calibration tests benchmarks ros_ws/src
# The robot-PC side and the env contract are type-checked (pyproject.toml [tool.mypy]).
TYPED_PATHS := rlinf_robot/protocol rlinf_robot/safety rlinf_robot/bridge rlinf_robot/envs rlinf_robot/robot rlinf_robot/teleop rlinf_robot/settings.py

lint: $(STAMPS)/venv
	@$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(VENV)/bin/ruff format --check $(LINT_PATHS)
	@$(VENV)/bin/lint-imports
	@$(VENV)/bin/mypy $(TYPED_PATHS)

format: $(STAMPS)/venv
	@$(VENV)/bin/ruff format $(LINT_PATHS)
	@$(VENV)/bin/ruff check --select I --fix $(LINT_PATHS)

clean:
	rm -rf build ros_ws/build ros_ws/install ros_ws/log
