"""What a recorded episode holds: every topic, its standard ROS 2 type and what it carries.

One table, read by the writer (``bag``) and by the report (``report``), so the two cannot
disagree on a name or a field. Every timestamp, the bag's receive time and each header stamp,
is on one clock: the driver's monotonic clock mapped once, when recording starts, to
nanoseconds since the epoch (``ros2 bag`` and Foxglove show wall time).

Key-value topics are ``diagnostic_msgs/msg/DiagnosticStatus``: ``name`` says what the record
is, ``message`` a short text, ``values`` its numbers as text (``KeyValue``), the same way the
node's ``/diagnostics`` carry numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    name: str
    msgtype: str
    #: What one message is.
    carries: str


#: The joint reading sent with each request: ``position`` the observation's joint positions,
#: ``velocity`` its joint velocities (empty when it had none), ``name`` the joint names when
#: the driver knows them (else empty). Header stamp: when the tick observed.
OBSERVATION = Topic(
    "/observation/joint_states",
    "sensor_msgs/msg/JointState",
    "the joint reading sent with a request",
)
#: The rest of the request: values ``request`` (the engine's request number, 1-based, shared
#: with ``CHUNK_INFO``), ``instruction``, ``gripper`` and ``end_effector_pose`` (comma
#: separated) when the observation had them, ``images`` (the views sent).
REQUEST = Topic("/observation/request", "diagnostic_msgs/msg/DiagnosticStatus", "one request")
#: Camera images as sent (JPEG or PNG bytes, ``format`` "jpeg" or "png"), one topic per view
#: (``IMAGE_PREFIX + view``), rate-limited per view (``RecordConfig.image_hz``), requests' and
#: those seen while a person has the arm (``HUMAN_JOINTS``) under one rate; frame_id is
#: the view. Header stamp: the frame's own capture time when it had one, else the tick's.
IMAGE_PREFIX = "/observation/image/"
IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
IMAGE_CARRIES = "a camera image sent, or seen while a person has the arm"
#: Each chunk received, as the model sent it (before any hand-over): point *i* is due at
#: header stamp (the chunk's anchor) + ``time_from_start``. ``positions`` hold the steps for
#: absolute and delta spaces, ``velocities`` for velocity spaces; ``joint_names`` are
#: ``a0``, ``a1``, ... (the action's dimensions).
CHUNK = Topic("/chunk", "trajectory_msgs/msg/JointTrajectory", "one chunk received")
#: Beside each ``CHUNK`` (same receive time): values ``request``, ``seq`` (the plan's chunk
#: number), ``request_id`` (the gateway's), ``model``, ``action_space``, ``hz``, ``steps``,
#: ``latency_s`` (observation to arrival), ``observed_at_s`` and ``anchor_s`` (epoch
#: seconds, the recording's clock), ``gripper_dims`` (the action dimensions that are gripper
#: positions, ``EngineConfig.gripper_indices``, comma separated; empty: none), which the
#: outcome's seam measures leave out: the report leaves out the same.
CHUNK_INFO = Topic("/chunk/info", "diagnostic_msgs/msg/DiagnosticStatus", "a chunk's metadata")
#: Each command played, exactly what reached ``act()`` or a publisher (the blended one):
#: ``data`` the action, ``layout.dim[0]`` labelled with the action space. Receive time: the
#: tick that played it.
COMMAND = Topic("/command", "std_msgs/msg/Float64MultiArray", "one command played")
#: Every hold: ``message`` the reason (``underrun``, ``release``: the arm held at a hand-back
#: until the policy's next chunk arrives, or the episode's stop reason).
HOLD = Topic("/hold", "diagnostic_msgs/msg/DiagnosticStatus", "one hold")
#: Engine events, ``name`` one of ``EVENTS``, values as listed there.
EVENTS_TOPIC = Topic("/events", "diagnostic_msgs/msg/DiagnosticStatus", "one engine event")
#: While a person has the arm (between ``takeover`` and ``release`` events): its joint reading
#: each time the episode observes it (``Journal.observed``), the fields of ``OBSERVATION``'s;
#: header stamp: when it was read. Its camera images go on the ``IMAGE_PREFIX`` topics, under
#: the same per-view rate as a request's; its gripper and end-effector pose on ``HUMAN_STATE``.
HUMAN_JOINTS = Topic(
    "/human/joint_states",
    "sensor_msgs/msg/JointState",
    "the joint reading while a person has the arm",
)
#: Beside each ``HUMAN_JOINTS`` reading whose observation had a gripper reading or an
#: end-effector pose (same receive time, the reading's header stamp): ``name`` ``arm``, values
#: ``gripper`` and ``end_effector_pose`` as ``REQUEST`` carries them, each only when the
#: observation had it; a reading with neither has no message here, never a zero.
HUMAN_STATE = Topic(
    "/human/state",
    "diagnostic_msgs/msg/DiagnosticStatus",
    "the gripper and end-effector pose while a person has the arm",
)
#: Each command a person's device sent while the arm was taken over, as the device sent it:
#: ``data`` its values, ``layout.dim[0]`` labelled with where it came from (a topic name or a
#: label). Receive time: when the driver took it.
OPERATOR = Topic(
    "/human/command", "std_msgs/msg/Float64MultiArray", "one command a person's device sent"
)
#: The episode's ``RunOutcome`` at its end: ``message`` the reason, one value per field (the
#: ``label``, a person's verdict, as text: ``success``, ``failure`` or empty).
OUTCOME = Topic("/outcome", "diagnostic_msgs/msg/DiagnosticStatus", "the episode's outcome")
#: The recorder's own account, last in every bag: values ``written``, ``dropped`` (messages
#: not recorded: queue full, over the cap, or a write that failed) and ``stopped`` (why
#: recording stopped early, empty if it did not).
RECORDING = Topic("/recording", "diagnostic_msgs/msg/DiagnosticStatus", "the recorder's counts")

#: Event names on ``EVENTS_TOPIC`` and their values.
EVENTS = {
    "underrun": (
        "a tick found nothing to play after the first command, one event a tick, as "
        "RunOutcome.underruns counts them; a run of them is a stall (values: none)"
    ),
    "retry": "a request failed and will be retried (values: error, the error's class)",
    "backoff": "requests in flight cut to one: the gateway queued (values: limit)",
    "skipped_stale": "steps passed over: their time went by in flight (values: steps)",
    "skipped_late": "steps passed over: a tick came late (values: steps)",
    "early": (
        "a tick in the slot of a step an earlier tick sent: it sent and held nothing, one "
        "event a tick, as RunOutcome.early_ticks counts them (values: none)"
    ),
    "discarded": (
        "a chunk arrived too late to play any step (values: request; latency_s, observation "
        "to arrival, which the outcome's refill latency counts as well)"
    ),
    "started": (
        "a chunk played its first step (values: seq; step, the index played; anchor_s, the "
        "anchor it played on in epoch seconds, which moves from the recorded one when the lag "
        "changed while it waited, or when it started early because the plan ran out)"
    ),
    "takeover": (
        "a person took the arm over: nothing is sent until the release, and the arm, its "
        "cameras and the operator's commands are recorded on the /human topics (values: none)"
    ),
    "release": (
        "a person handed the arm back; a release hold follows until the policy's next chunk "
        "arrives (values: takeover_s, the seconds it was taken over)"
    ),
}

TOPICS = (
    OBSERVATION, REQUEST, CHUNK, CHUNK_INFO, COMMAND, HOLD, EVENTS_TOPIC, HUMAN_JOINTS,
    HUMAN_STATE, OPERATOR, OUTCOME, RECORDING,
)  # fmt: skip
