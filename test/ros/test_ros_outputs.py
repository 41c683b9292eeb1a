"""The output-type registry (sequence_ai_ros/outputs) is the only list of output types, and
what the node's command sink builds from each is what the simulated arm reads from it
(sequence_ai_sim.commands, by message type). ROS-free: messages are Humble's definitions
(rosbags); the real-ROS tier runs the same on rclpy."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import humble_messages as messages

from sequence_ai_ros import conversions as conv
from sequence_ai_ros import outputs, parameters
from sequence_ai_ros.command_sink import BUILD_AHEAD_S, CommandSink, Publishers
from sequence_ai_sim.commands import controller_takes, reader_for
from sequence_ai_sim.controllers import CONTROLLER_MODELS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sequence_ai_ros"
JOINTS = [f"joint_{i + 1}" for i in range(7)]


@pytest.fixture(scope="module")
def types() -> conv.MessageTypes:
    types: conv.MessageTypes = messages.message_types()
    return types


class Topic:
    """A publisher's far end: every message published, in order."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def publish(self, msg: Any) -> None:
        self.messages.append(msg)


def config(output_type: str, **changes: Any) -> parameters.NodeConfig:
    values = {spec.name: spec.default for spec in parameters.PARAMETERS}
    values.update(output_type=output_type, joint_names=JOINTS, **changes)
    return parameters.parse(values)


def sink(
    types: conv.MessageTypes, output_type: str, **changes: Any
) -> tuple[CommandSink, Topic, Topic]:
    cfg = config(output_type, **changes)
    action, gripper = Topic(), Topic()
    publishers = Publishers(action, gripper if cfg.gripper_topic else None, Topic())
    made = CommandSink(
        cfg, outputs.get(output_type), types, publishers, lambda: 1_800_000_000 * 10**9
    )
    return made, action, gripper


# ---------------------------------------------------------------------- one list


def test_the_parameter_choices_and_default_are_the_registry() -> None:
    spec = next(s for s in parameters.PARAMETERS if s.name == "output_type")
    assert spec.constraints.split(" | ") == list(outputs.OUTPUT_TYPES) == list(outputs.names())
    assert spec.default == outputs.DEFAULT in outputs.OUTPUT_TYPES
    assert {"float64_multi_array", "joint_trajectory", "joint_state"} == set(outputs.OUTPUT_TYPES)
    for name, output in outputs.OUTPUT_TYPES.items():
        assert output.name == name and config(name).output_type == name
    with pytest.raises(parameters.ParameterError, match=r"output_type.*float64_multi_array"):
        config("twist")
    with pytest.raises(KeyError, match="joint_state"):
        outputs.get("twist")


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_no_module_outside_the_registry_names_an_output_type_or_its_message() -> None:
    names = set(outputs.OUTPUT_TYPES)
    message_classes = {"Float64MultiArray", "JointState", "JointTrajectory"}
    checked = 0
    for path in sorted([*PACKAGE.glob("*.py"), *(ROOT / "launch").glob("*.py")]):
        assert not names & _string_constants(path), f"{path.name} lists output types itself"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
                assert not message_classes & {ast.unparse(a) for a in ast.walk(node.args[1])}, (
                    f"{path.name}:{node.lineno} dispatches on the message class"
                )
        checked += 1
    assert checked >= 17
    # The sim arm takes its message class from the registry (and reads it by that class).
    sim_arm = (PACKAGE / "sim_arm_node.py").read_text(encoding="utf-8")
    assert "import Float64MultiArray" not in sim_arm and "import JointTrajectory" not in sim_arm
    assert "outputs.get(command_type)" in sim_arm


_NEW_TYPE = '''
"""A forward position controller fed joint targets (a test's new output type)."""

from typing import Any

from .. import conversions as conv
from .float64_multi_array import Float64MultiArrayOutput


class PositionArrayOutput(Float64MultiArrayOutput):
    name = "position_array"
    needs_positions = True

    def arm_message(self, envelope: Any, command: conv.Command, **_: Any) -> Any:
        return conv.float64_multi_array(envelope.types, command.positions, "positions")


OUTPUT = PositionArrayOutput()
'''

_USE_IT = """
import numpy as np
from support import humble_messages as messages
from sequence_ai_ros import conversions as conv, outputs, parameters
from sequence_ai_ros.command_sink import CommandSink, Publishers
from sequence_ai_sim.commands import reader_for

spec = next(s for s in parameters.PARAMETERS if s.name == "output_type")
assert "position_array" in spec.constraints.split(" | "), spec.constraints
values = {s.name: s.default for s in parameters.PARAMETERS}
config = parameters.parse({**values, "output_type": "position_array"})
types = messages.message_types()

class Topic(list):
    publish = list.append

topic = Topic()
output = outputs.get("position_array")
sink = CommandSink(config, output, types, Publishers(topic, None, Topic()), lambda: 0)
velocity = conv.command_from_action(np.array([0.5, -0.5]), action_space="joint_velocity",
    gripper_dims=0, measured=np.array([1.0, 2.0]), period_s=0.1)
assert sink.send(velocity, 0.1, "joint_velocity") is None
assert list(topic[0].data) == [1.05, 1.95], topic
blind = conv.command_from_action(np.array([0.5, -0.5]), action_space="joint_velocity",
    gripper_dims=0, measured=None, period_s=0.1)
assert "needs joint positions" in sink.send(blind, 0.1, "joint_velocity")
assert reader_for(output.message_type(types)).values(topic[0], velocity=True) == [1.05, 1.95]
print("ok")
"""


def test_adding_an_output_type_is_adding_one_module(tmp_path: Path) -> None:
    """A copy of the package with one module more: parameters and sink take it, and the
    simulated arm reads its messages with nothing added to the simulator."""
    copy = tmp_path / "sequence_ai_ros"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "outputs" / "position_array.py").write_text(_NEW_TYPE, encoding="utf-8")
    path = os.pathsep.join([str(tmp_path), str(ROOT / "test"), *sys.path])
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_USE_IT)],
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr[-3000:]


# ---------------------------------------------------------------------- what goes out


@pytest.mark.parametrize("output_type", list(outputs.OUTPUT_TYPES))
@pytest.mark.parametrize("space", ["joint_velocity", "joint_absolute"])
def test_the_sim_arm_decodes_what_the_sink_sends(
    types: conv.MessageTypes, output_type: str, space: str
) -> None:
    made, action, gripper = sink(types, output_type, gripper_dims=1, gripper_topic="gripper")
    values = np.array([0.1, -0.2, 0.3, 0.0, 0.05, -0.1, 0.2, 0.7])
    measured = np.linspace(-1.0, 1.0, 7)
    command = conv.command_from_action(
        values, action_space=space, gripper_dims=1, measured=measured, period_s=0.1
    )
    assert made.send(command, 0.1, space) is None
    output = outputs.get(output_type)
    (arm_msg,) = action.messages
    (gripper_msg,) = gripper.messages
    assert isinstance(arm_msg, output.message_type(types))
    assert isinstance(gripper_msg, output.message_type(types))
    velocity = space == "joint_velocity"
    reader = reader_for(output.message_type(types))
    decoded = reader.values(arm_msg, velocity=velocity)
    expected = values[:7] if velocity or not output.needs_positions else command.positions
    if output_type == "joint_trajectory" and velocity:
        # Velocities only where the controller takes them at the last point (Jazzy default).
        expected = command.positions
    assert np.allclose(decoded, expected)
    assert reader.values(gripper_msg, velocity=False) == [0.7]


def test_the_sim_arm_follows_every_output_type_behind_the_controllers_that_take_it(
    types: conv.MessageTypes,
) -> None:
    """Every registered output type's message is one the simulated arm reads, and each
    controller model takes the message type its real controller subscribes to."""
    message_types = {name: o.message_type(types) for name, o in outputs.OUTPUT_TYPES.items()}
    for message_type in message_types.values():
        reader_for(message_type)  # ValueError for a message type the arm cannot read
    taken_by = {
        name: {c for c in CONTROLLER_MODELS if controller_takes(c, message_type)}
        for name, message_type in message_types.items()
    }
    jtc = {c for c in CONTROLLER_MODELS if c.startswith("jtc_")}
    assert taken_by == {
        "float64_multi_array": {"forward_command"},
        "joint_trajectory": jtc,
        "joint_state": set(),
    }
    assert len(jtc) == 4 and not controller_takes("forward_command", types.Duration)


def test_joint_outputs_refuse_a_command_without_joint_targets(types: conv.MessageTypes) -> None:
    for output_type, output in outputs.OUTPUT_TYPES.items():
        made, action, _ = sink(types, output_type)
        blind = conv.command_from_action(
            np.zeros(7), action_space="joint_velocity", gripper_dims=0, measured=None, period_s=0.1
        )
        problem = made.send(blind, 0.1, "joint_velocity")
        assert (problem is not None) == output.needs_positions, output_type
        assert len(action.messages) == (0 if output.needs_positions else 1)


def test_a_streamed_chunk_goes_out_once_and_a_hold_replaces_it(types: conv.MessageTypes) -> None:
    made, action, _ = sink(types, "joint_trajectory")
    assert made.streams_chunks
    steps = np.tile(np.linspace(0.0, 0.6, 7), (5, 1)) * np.arange(1, 6)[:, None]
    problem = made.stream(
        steps,
        chunk_seq=3,
        action_space="joint_absolute",
        measured=steps[0],
        period_s=0.1,
        late_s=0.25,
    )
    assert problem is None and made.streamed(3) and not made.streamed(4)
    (trajectory,) = action.messages
    assert len(trajectory.points) == 5 and trajectory.joint_names == JOINTS
    stamp_ns = trajectory.header.stamp.sec * 10**9 + trajectory.header.stamp.nanosec
    assert stamp_ns == 1_800_000_000 * 10**9 - 250_000_000  # when the first step was due
    hold = conv.Command(steps[0], np.zeros(0), positions=steps[0])
    assert made.send_hold(hold, 0.1, "joint_absolute") is None
    assert not made.streamed(3) and len(action.messages[-1].points) == 1
    point_sink, _, _ = sink(types, "joint_trajectory", trajectory_mode="point")
    assert not point_sink.streams_chunks


ROS_MODULES = {"policy_node", "node_io", "interfaces", "messages", "health_publisher"}
ROS_MODULES |= {"rclpy_guards", "sim_arm_node", "episode_action", "chunk_validator"}
ROS_MODULES |= {"sensor_inputs"}


def test_only_the_modules_said_to_import_ros_do() -> None:
    """The package docstring's list: every other module imports with no ROS module loaded
    (nor the simulator, which only the simulated arm needs)."""
    modules = [*PACKAGE.glob("*.py"), *PACKAGE.glob("*/*.py")]  # outputs/, parameters/
    dotted = (".".join(p.relative_to(ROOT).with_suffix("").parts) for p in modules)
    free = sorted(
        d.removesuffix(".__init__") for d in dotted if d.split(".")[-1] not in ROS_MODULES
    )
    probe = (
        "import importlib, sys\n"
        f"for name in {free!r}: importlib.import_module(name)\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(roots & {'rclpy', 'std_msgs', 'sensor_msgs', 'trajectory_msgs',"
        " 'builtin_interfaces', 'std_srvs', 'diagnostic_msgs', 'lifecycle_msgs',"
        " 'sequence_ai_sim'}))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "[]", ran.stdout + ran.stderr[-2000:]
    assert len(free) >= 12
    documented = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    assert all(f"``{name}``" in documented for name in ROS_MODULES)


def test_the_layout_lists_every_module_of_the_node_package() -> None:
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    block = page.split("Inside `sequence_ai_ros`", 1)[1].split("```\n", 2)[1]
    rows = [line.split() for line in block.splitlines() if line and not line.startswith(" ")]
    listed = {row[0].rstrip("/") for row in rows}
    marked = {row[0].removesuffix(".py") for row in rows if row[1] == "ROS"}
    assert all((PACKAGE / name).exists() for name in listed), listed
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert modules - listed <= {"health_publisher.py"} and "outputs" in listed
    assert "health_publisher.py" in block  # named on the diagnostics row
    assert marked | {"health_publisher"} == ROS_MODULES


class Clocked(Topic):
    """A far end that notes when (monotonic) each message was published."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def publish(self, msg: Any) -> None:
        self.at.append(time.monotonic())
        super().publish(msg)


def _clocked_sink(types: conv.MessageTypes) -> tuple[CommandSink, Clocked, Clocked]:
    cfg = config("joint_state", gripper_dims=1, gripper_topic="gripper")
    action, gripper = Clocked(), Clocked()
    made = CommandSink(
        cfg, outputs.get("joint_state"), types, Publishers(action, gripper, Topic()),
        lambda: 1_800_000_000 * 10**9,
    )  # fmt: skip
    return made, action, gripper


def test_a_command_built_before_its_due_time_goes_out_at_it_stamped_with_it(
    types: conv.MessageTypes,
) -> None:
    made, action, gripper = _clocked_sink(types)
    command = conv.command_from_action(
        np.full(8, 0.1), action_space="joint_absolute", gripper_dims=1, measured=None,
        period_s=0.1,
    )  # fmt: skip
    asked = time.monotonic()  # a due time far off: built BUILD_AHEAD_S early at most
    assert made.send(command, 0.1, "joint_absolute", at=asked + 30.0) is None
    assert BUILD_AHEAD_S <= action.at[0] - asked < 5.0 and gripper.at[0] >= action.at[0]
    stamps = [m.header.stamp for m in (action.messages[0], gripper.messages[0])]
    assert stamps[0] == stamps[1] and stamps[0].nanosec == int(BUILD_AHEAD_S * 1e9)  # due then

    due = time.monotonic() + BUILD_AHEAD_S / 2
    assert made.send(command, 0.1, "joint_absolute", at=due) is None
    assert action.at[1] >= due and gripper.at[1] >= due

    made.send(command, 0.1, "joint_absolute", at=time.monotonic() - 1.0)  # due: out now
    made.send_hold(command, 0.1, "joint_absolute")  # a hold never waits
    assert [m.header.stamp.nanosec for m in action.messages[2:]] == [0, 0]  # the node's now
