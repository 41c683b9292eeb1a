# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use (`make test` also .venv-ros, real ROS 2 Jazzy from PyPI wheels).
# Python 3.10 (what ROS 2 Humble runs) is preferred when present.
PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) $(shell command -v python3.10 2>/dev/null) python3)
VENV := .venv
BIN := $(VENV)/bin
# Humble's rclpy Python sources (rclpy-intellisense) for the static API check, kept outside
# sys.path: installed into a venv they would shadow a real rclpy.
HUMBLE_RCLPY := $(VENV)/humble-rclpy
# The real-ROS tier: ROS 2 Jazzy from PyPI wheels (rclpy with Fast DDS and the message packages
# the nodes use), no system ROS, in a venv of its own.
ROS_VENV := .venv-ros
ROS_BIN := $(ROS_VENV)/bin
ROS_WHEELS := ros-jazzy-rclpy[fastrtps] ros-jazzy-std-msgs ros-jazzy-sensor-msgs \
	ros-jazzy-trajectory-msgs ros-jazzy-diagnostic-msgs ros-jazzy-std-srvs \
	ros-jazzy-lifecycle-msgs ros-jazzy-builtin-interfaces ros-jazzy-rcl-interfaces \
	ros-jazzy-ament-index-python
OPENPI_PEERS := openpi-server==0.1.0 openpi-client==0.1.2

.PHONY: demo test lint typecheck pytest pytest-ros bench bench-full bench-ros soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: $(BIN)/python setup.py
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.test: $(VENV)/.core setup.py
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	# The test peer sequence-ai 0.1.0 installs its own `sequence-ai` script; put ours back.
	$(BIN)/python -m pip install -q --no-deps --force-reinstall -e .
	# openpi's WebsocketPolicyServer and client, the openpi backend's peers: without their
	# declared dependencies (openpi-client pins numpy < 2), whose imports the test extra has.
	$(BIN)/python -m pip install -q --no-deps $(OPENPI_PEERS)
	$(BIN)/python -m pip uninstall -q -y rclpy-intellisense 2>/dev/null || true
	$(BIN)/python -m pip install -q --no-deps --upgrade --target $(HUMBLE_RCLPY) rclpy-intellisense==1.2.0
	touch $@

$(ROS_BIN)/python:
	$(PYTHON) -m venv $(ROS_VENV)
	$(ROS_BIN)/python -m pip install -q --upgrade pip

$(ROS_VENV)/.ros: $(ROS_BIN)/python setup.py Makefile
	$(ROS_BIN)/python -m pip install -q $(foreach w,$(ROS_WHEELS),'$(w)') \
		'pytest>=7' 'pytest-timeout>=2.1' 'typing_extensions>=4' -e '.[openpi]'
	# the openpi server the node is driven against in test_ros_real_openpi.py
	$(ROS_BIN)/python -m pip install -q --no-deps $(OPENPI_PEERS)
	touch $@

demo: $(VENV)/.core
	$(BIN)/python -m sequence_ai_core.demo

lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check sequence_ai_core sequence_ai_sim sequence_ai_ros

# rclpy and the message packages ship no stubs: setup.cfg lets mypy take them as Any.
typecheck: $(VENV)/.test
	$(BIN)/mypy sequence_ai_core sequence_ai_sim sequence_ai_ros

pytest: $(VENV)/.test
	SEQUENCE_AI_HUMBLE_RCLPY=$(HUMBLE_RCLPY)/rclpy $(BIN)/python -m pytest -q -m "not soak and not ros"

# The node as shipped on real rclpy, in separate processes; refuses to skip (test/realros).
pytest-ros: $(ROS_VENV)/.ros
	SEQUENCE_AI_REAL_ROS=required $(ROS_BIN)/python -m pytest -q -m ros test/test_ros_real_*.py

test: lint typecheck pytest pytest-ros

bench: $(VENV)/.test
	$(BIN)/python -m bench

bench-full: $(VENV)/.test
	$(BIN)/python -m bench --full

bench-ros: $(ROS_VENV)/.ros
	$(ROS_BIN)/python -m bench ros_node

soak: $(VENV)/.test
	$(BIN)/python -m pytest -q -s -m soak

clean:
	rm -rf $(VENV) $(ROS_VENV) build *.egg-info
