"""The node's latest inputs (sequence_ai_ros/inputs.py): staleness, missing topics, images, and
the observation built from them."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from PIL import Image as PILImage
from support.node_params import raw_params

from sequence_ai_ros import parameters
from sequence_ai_ros.inputs import InputStore, RawImage


def test_inputs_stale_missing_and_images() -> None:
    clock = [100.0]
    config = parameters.parse(
        raw_params(
            joint_names=["a", "b"],
            camera_views=["front", "wrist"],
            camera_topics=["/front", "/wrist"],
            camera_encodings=["raw", "compressed"],
            image_size=[32, 24],
            max_observation_age_s=0.5,
            instruction="pick",
        )
    )
    store = InputStore(config, monotonic=lambda: clock[0], wall=lambda: 1_700_000_000.0)
    assert store.observe() is None and store.problem == "no joint_states received yet"
    store.on_joint_state(["a", "b"], [0.1, 0.2], [], stamp_s=1_699_999_999.9)
    assert store.observe() is None and store.problem == "no image on /front received yet"
    store.on_image("front", RawImage(2, 2, "rgb8", 6, bytes(12)))
    jpeg = io.BytesIO()
    PILImage.new("RGB", (8, 8), (200, 10, 10)).save(jpeg, format="JPEG")
    store.on_image("wrist", jpeg.getvalue())
    observation = store.observe()
    assert observation is not None and store.problem is None
    assert list(observation.proprioception.joint_positions) == [0.1, 0.2]
    assert observation.proprioception.joint_velocities is None
    assert [f.view for f in observation.images] == ["front", "wrist"]
    assert observation.images[0].timestamp_ms == 1_700_000_000_000  # arrival time (no stamp)
    assert all(PILImage.open(io.BytesIO(f.data)).size == (32, 24) for f in observation.images)
    assert observation.instruction == "pick"
    clock[0] += 0.6
    assert store.observe() is None and "joint_states is 0.60 s old" in str(store.problem)


def test_frames_are_pulled_before_observe_reads_them_and_keep_their_arrival() -> None:
    """The cameras' newest frames come in through ``pull_frames`` when a request is due; a
    frame that arrived 0.6 s before it was taken is 0.6 s old."""
    clock = [100.0]
    config = parameters.parse(
        raw_params(joint_names=["a"], camera_views=["front"], camera_topics=["/front"])
    )
    store = InputStore(config, monotonic=lambda: clock[0])
    pulls: list[float] = []

    def pull(arrived: float) -> None:
        pulls.append(clock[0])
        store.on_image("front", RawImage(2, 2, "rgb8", 6, bytes(12)), None, arrived)

    store.pull_frames = lambda: pull(clock[0] - 0.1)
    store.on_joint_state(["a"], [0.0], [])
    assert store.observe() is not None and pulls == [100.0]
    clock[0] += 1.0
    store.on_joint_state(["a"], [0.0], [])
    store.pull_frames = lambda: pull(clock[0] - 0.6)
    assert store.observe() is None and "image on /front is 0.60 s old" in str(store.problem)
    assert pulls == [100.0, 101.0]


def test_arm_stale_ends_motion_on_an_old_or_unusable_reading_not_before_the_first() -> None:
    clock = [10.0]
    config = parameters.parse(raw_params(joint_names=["a", "b"], max_observation_age_s=0.5))
    store = InputStore(config, monotonic=lambda: clock[0])
    assert store.arm_stale(0.5) is None  # nothing received: nothing can have been sent
    store.on_joint_state(["a", "b"], [0.1, 0.2], [])
    clock[0] += 0.5
    assert store.arm_stale(0.5) is None
    clock[0] += 0.01
    assert store.arm_stale(0.5) == "joint_states is 0.51 s old (max_observation_age_s=0.5)"
    store.on_joint_state(["a", "b"], [0.1, float("nan")], [])
    assert store.arm_stale(0.5) == "joint_states has non-finite positions"


WARM_UP = """
import sys
from support.node_params import raw_params
from sequence_ai_ros import parameters
from sequence_ai_ros.inputs import InputStore
cameras = dict(camera_views=["front"], camera_topics=["/front"]) if sys.argv[1] == "1" else {}
store = InputStore(parameters.parse(raw_params(joint_names=["a"], **cameras)))
assert "PIL.JpegImagePlugin" not in sys.modules
store.warm_up()
print("PIL.JpegImagePlugin" in sys.modules)
"""


def test_warm_up_loads_the_jpeg_codec_only_for_a_node_with_cameras() -> None:
    """Configure pays Pillow's first-image cost, not an episode's first request; a node
    without cameras does not pay it at all."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for cameras, loaded in (("1", "True"), ("0", "False")):
        ran = subprocess.run(
            [sys.executable, "-c", WARM_UP, cameras],
            cwd=here, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == loaded
