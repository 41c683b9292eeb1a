"""Output types into ros2_control controller models: tracking, command jumps, rejections.

For pi05-droid (joint velocities) and lingbot-va-5b (joint positions) the engine first plays
against the gateway simulator in real time (0.79 s refill) and every tick is recorded: what
it played, the chunk it came from, and how late the tick ran. Each recording is then
replayed, on a virtual clock, through the node's own message builders
(``sequence_ai_ros.conversions`` and ``trajectories``) into each controller model of
``sequence_ai_sim.controllers`` at 500 Hz, in front of a servo lagging 30 ms. So every
row sees the same plan, and only the output type and the controller differ.

Columns: tracking error = largest per-joint distance between the arm and the simulator's
reference trajectory, sampled at every tick (mean / p95); largest jump = the largest change
of the commanded joint position between two 2 ms controller cycles (for velocity commands,
of the position they integrate to); rejected = messages the controller refused / sent.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench._common import BENCH_KEY, machine_note, mean, quantile, ratio
from bench._common import table as markdown_table
from bench.continuity import MEDIAN_S
from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray
from sequence_ai_ros import conversions as conv
from sequence_ai_ros import trajectories as traj
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm, reference_position
from sequence_ai_sim.controlled import JUMP_RAD, SERVO_LAG_S, ControlledJoints
from sequence_ai_sim.trajectory import Trajectory, TrajectoryPoint

MODELS = ("pi05-droid", "lingbot-va-5b")
#: Quick: recording, then replaying, cost about twice the seconds (9 s at 5, 18 s at 10).
QUICK_SECONDS, FULL_SECONDS = 4.0, 30.0
#: Publish-to-callback delay of a message on one machine.
DELIVERY_S = 0.001
#: (label, output type, trajectory mode, velocities, controller models it goes to)
JTC = ("jtc_humble", "jtc_jazzy", "jtc_humble_open_loop", "jtc_jazzy_desired_state")
OUTPUTS = (
    ("Float64MultiArray per tick", "float64", "", False, ("forward_command",)),
    ("JointTrajectory, 1 point per tick", "jt", "point", False, JTC),
    ("JointTrajectory, 1 point per tick + velocities", "jt", "point", True, JTC),
    ("JointTrajectory, rest of chunk (default)", "jt", "chunk", False, JTC),
    ("JointTrajectory, rest of chunk + velocities", "jt", "chunk", True, JTC),
)
CONTROLLER_LABELS = {
    "forward_command": "forward_command_controller",
    "jtc_humble": "JTC, Humble defaults",
    "jtc_jazzy": "JTC, Jazzy defaults",
    "jtc_humble_open_loop": "JTC, Humble open_loop_control",
    "jtc_jazzy_desired_state": "JTC, Jazzy interpolate_from_desired_state",
}


@dataclass(frozen=True)
class TickRecord:
    wall: float  # time.time() of the tick: ROS time
    kind: str
    action: FloatArray | None
    chunk_seq: int
    late_s: float  # how long after its planned time the step was played
    remaining: FloatArray | None  # the chunk's steps from this one on, when it is new


@dataclass(frozen=True)
class Recording:
    model: str
    period_s: float
    action_space: str
    ticks: list[TickRecord]


def record(model: str, seconds: float) -> Recording:
    """The engine against the simulator in real time, every tick recorded."""
    entry = CATALOGUE[model]
    period = 1.0 / entry.control_hz
    ticks: list[TickRecord] = []
    with (
        GatewaySimulator(api_key=BENCH_KEY, latency_s=MEDIAN_S) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url) as policy,
    ):
        arm = SimulatedArm(model, image_size=(48, 64))
        config = EngineConfig(expected_covers_s=entry.covers_seconds)
        with PlaybackEngine(policy, config, clock=time.monotonic) as engine:
            start = time.monotonic()
            for n in range(int(seconds * entry.control_hz)):
                time.sleep(max(0.0, start + n * period - time.monotonic()))
                now = time.monotonic()
                tick = engine.tick(now, arm.observe)
                remaining, late = None, 0.0
                current = engine.current_chunk
                if tick.kind == "action" and current is not None:
                    chunk, anchor = current
                    late = traj.due_offset_s(anchor, tick.step_index, period, now)
                    if tick.new_chunk:
                        remaining = np.array(chunk.steps[tick.step_index :], dtype=np.float64)
                if tick.action is not None:
                    arm.act(tick.action)
                    engine.commit()
                ticks.append(
                    TickRecord(time.time(), tick.kind, tick.action, tick.chunk_seq, late, remaining)
                )
    return Recording(model, period, entry.action_space, ticks)


def _trajectory(
    positions: FloatArray, velocities: FloatArray | None, times: FloatArray, stamp: float
) -> Trajectory:
    rows = velocities if velocities is not None else [None] * len(times)
    points = tuple(
        TrajectoryPoint(
            tuple(float(v) for v in p),
            () if v is None else tuple(float(x) for x in v),
            (),
            round(t * 1e9),
        )
        for p, v, t in zip(positions, rows, times, strict=True)
    )
    names = tuple(f"joint_{i + 1}" for i in range(positions.shape[1]))
    return Trajectory(names, points, round(stamp * 1e9))


@dataclass(frozen=True)
class Result:
    tracking: list[float]
    max_jump: float
    jumps: int
    rejected: int
    sent: int


def _message(
    rec: Recording,
    tick: TickRecord,
    output: str,
    mode: str,
    velocities: bool,
    arm: ControlledJoints,
    streamer: traj.ChunkStreamer,
) -> Trajectory | list[float] | None:
    """What the node publishes for this tick (None: nothing this tick), as its command sink
    builds it."""
    assert tick.action is not None
    joints = len(arm.joints)
    measured = arm.positions
    if output == "float64":
        return [float(v) for v in tick.action[:joints]]
    if mode == "chunk":
        if tick.remaining is None:
            return None  # the controller plays the chunk sent when it started
        steps = tick.remaining.copy()
        steps[0] = tick.action
        stamp = tick.wall - tick.late_s
        planned = streamer.plan(steps, measured=measured, period_s=rec.period_s, stamp_s=stamp)
        assert isinstance(planned, traj.PlannedTrajectory), planned
        return _trajectory(planned.positions, planned.velocities, planned.times_s, stamp)
    command = conv.command_from_action(
        tick.action,
        action_space=rec.action_space,
        gripper_dims=1,
        measured=measured,
        period_s=rec.period_s,
    )
    assert command.positions is not None
    vel = command.velocities if velocities else None
    return _trajectory(
        command.positions[None, :],
        None if vel is None else vel[None, :],
        np.array([rec.period_s]),
        tick.wall,
    )


def _hold(
    output: str, rec: Recording, arm: ControlledJoints, wall: float
) -> Trajectory | list[float]:
    joints = len(arm.joints)
    if output == "float64":  # velocity spaces only (absolute targets hold by themselves)
        return [0.0] * joints
    zeros = np.zeros((1, joints))
    return _trajectory(arm.positions[None, :], zeros, np.array([rec.period_s]), wall)


def replay(rec: Recording, output: str, mode: str, velocities: bool, controller: str) -> Result:
    entry = CATALOGUE[rec.model]
    first = rec.ticks[0].wall
    start = reference_position(entry, first)[:-1]
    velocity = kind_of(rec.action_space) == "velocity"
    arm = ControlledJoints(
        controller,
        [f"joint_{i + 1}" for i in range(entry.joint_count)],
        start,
        first,
        velocity_commands=velocity,
        lag_s=SERVO_LAG_S,
    )
    streamer = traj.ChunkStreamer(
        action_space=rec.action_space, gripper_dims=1, velocities=velocities
    )
    tracking: list[float] = []
    sent = rejected = 0
    held = True
    started = False
    for tick in rec.ticks:
        arm.advance(tick.wall)
        if started:
            error = np.abs(arm.positions - reference_position(entry, tick.wall)[:-1])
            tracking.append(float(np.max(error)))
        msg: Trajectory | list[float] | None = None
        if tick.kind == "action" and tick.action is not None:
            started = True
            msg = _message(rec, tick, output, mode, velocities, arm, streamer)
            held = False
        elif tick.kind == "underrun" and not held and kind_of(rec.action_space) != "absolute":
            msg, held = _hold(output, rec, arm, tick.wall), True
            streamer.reset()
        if msg is not None:
            sent += 1
            rejected += arm.send(msg, tick.wall + DELIVERY_S) is not None
    return Result(tracking, arm.max_command_jump, arm.jumps, rejected, sent)


def _rows(rec: Recording) -> list[list[str]]:
    rows = []
    baseline: Result | None = None
    for label, output, mode, velocities, controllers in OUTPUTS:
        for controller in controllers:
            result = replay(rec, output, mode, velocities, controller)
            baseline = baseline or result
            err = result.tracking
            rows.append(
                [
                    label,
                    CONTROLLER_LABELS[controller],
                    f"{mean(err):.3f} / {quantile(err, 0.95):.3f}",
                    ratio(quantile(err, 0.95), quantile(baseline.tracking, 0.95)),
                    f"{result.max_jump:.4f}",
                    ratio(result.max_jump, baseline.max_jump),
                    str(result.jumps),
                    f"{result.rejected} / {result.sent}",
                ]
            )
    return rows


def run(full: bool) -> str:
    seconds = FULL_SECONDS if full else QUICK_SECONDS
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(MODELS), mp_context=context) as pool:
        recordings = list(pool.map(record, MODELS, [seconds] * len(MODELS)))
    headers = [
        "output",
        "controller",
        "tracking error mean / p95 rad",
        "p95 vs first row",
        "largest jump per 2 ms cycle rad",
        "jump vs first row",
        f"cycles jumping > {JUMP_RAD * 1000:.0f} mrad",
        "rejected / sent",
    ]
    parts = [
        "## Output types into ros2_control controllers",
        machine_note(full=full, sizes=f"{seconds:g} s of motion per model"),
        f"{seconds:g} s of motion per model at a {MEDIAN_S} s refill; controllers at 500 Hz "
        f"in front of a servo lagging {SERVO_LAG_S * 1000:.0f} ms; messages arrive "
        f"{DELIVERY_S * 1000:.0f} ms after the tick. Each model's rows replay one recording."
        + ("" if full else " Quick run: a few seams per model: the largest jumps rest on them."),
    ]
    for rec in recordings:
        entry = CATALOGUE[rec.model]
        played = sum(t.kind == "action" for t in rec.ticks)
        parts += [
            f"### {rec.model} ({entry.action_space}, {entry.covers_seconds:.2f} s chunks at "
            f"{entry.control_hz:g} Hz, {played} actions)",
            markdown_table(headers, _rows(rec)),
        ]
    return "\n\n".join(parts)
