"""``sequence-ai doctor --base-url ws://host:8000 --profile droid``: is this openpi server ready?

Checks, one line each: ``GET /healthz``; the websocket handshake and the metadata frame;
one inference from a minimal observation (black frames, zero state) checked against the
profile; the inference latency on one kept-alive connection against the cost of a new
connection (handshake plus metadata). ``--no-act`` sends no observation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import SequencesError
from ..frames import RawFrame
from ..policy import Policy
from ..tools.doctor import FAIL, OK, SKIP, Check
from ..types import Observation, Proprioception
from .backend import open_backend
from .profiles import Profile
from .user_profiles import load_profile

_FIXED_SIZES = {"gripper": 1, "end_effector_pose": 7}


@dataclass
class OpenpiDoctorSettings:
    base_url: str
    profile: str
    api_key: str | None = None
    samples: int = 3
    act: bool = True


def minimal_observation(profile: Profile) -> Observation:
    """Black frames for every camera and zeros for every state entry of ``profile``."""
    fields: dict[str, list[float]] = {}
    for spec in profile.state:
        free = [s for s in spec.sources if s not in _FIXED_SIZES]
        left = spec.size - sum(_FIXED_SIZES.get(s, 0) for s in spec.sources)
        for i, source in enumerate(free):
            share = left // len(free) + (1 if i < left % len(free) else 0)
            fields[source] = [0.0] * share
        for source in spec.sources:
            if source in _FIXED_SIZES:
                fields[source] = [0.0] * _FIXED_SIZES[source]
    proprio = Proprioception(
        joint_positions=fields.get("joint_positions", []),
        joint_velocities=fields.get("joint_velocities"),
        end_effector_pose=fields.get("end_effector_pose"),
        gripper=fields["gripper"][0] if "gripper" in fields else None,
    )
    frames = [
        RawFrame(spec.view, np.zeros((spec.height, spec.width, 3), np.uint8), copy=False)
        for spec in profile.images
    ]
    return Observation(proprioception=proprio, images=frames, instruction="doctor check")


def run_openpi_doctor(settings: OpenpiDoctorSettings, emit: Callable[[str], None] = print) -> bool:
    """Run every check, emitting one line each; True when nothing failed."""
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        emit(check.line())

    try:
        profile = load_profile(settings.profile)
    except (SequencesError, ValueError) as exc:
        record(Check("profile", FAIL, str(exc)))
        emit("verdict: NOT ready (profile)")
        return False
    record(
        Check(
            "profile",
            OK,
            f"{profile.name}: {profile.action_space} x{profile.action_dim} "
            f"at {profile.control_hz:g} Hz, views {', '.join(profile.views)}",
        )
    )
    try:
        backend = open_backend(
            settings.base_url,
            profile,
            api_key=settings.api_key,
            timeout_s=30.0,
            connect_timeout_s=5.0,
            verify=True,
            max_connections=2,
        )
    except (SequencesError, ValueError) as exc:
        record(Check("server URL", FAIL, str(exc)))
        emit("verdict: NOT ready (server URL)")
        return False
    with Policy(backend.model_name, backend) as policy:
        try:
            status, seconds = backend.health()
            verdict = OK if status == 200 else FAIL
            record(Check("healthz", verdict, f"HTTP {status} in {seconds * 1000:.0f} ms"))
        except SequencesError as exc:
            record(Check("healthz", FAIL, str(exc)))
        try:
            started = time.monotonic()
            entry = policy.describe()
            keys = sorted(entry.raw.get("server_metadata") or {})
            detail = f"metadata in {(time.monotonic() - started) * 1000:.0f} ms, keys {keys}"
            record(Check("websocket", OK, detail))
        except SequencesError as exc:
            record(Check("websocket", FAIL, str(exc)))
        if not settings.act:
            record(Check("inference", SKIP, "--no-act"))
        elif checks[-1].verdict == FAIL:
            record(Check("inference", SKIP, "no websocket connection"))
        else:
            record(_check_inference(policy, profile, settings.samples))
    failed = [c.name for c in checks if c.verdict == FAIL]
    emit("verdict: " + ("ready" if not failed else "NOT ready (" + ", ".join(failed) + ")"))
    return not failed


def _check_inference(policy: Policy, profile: Profile, samples: int) -> Check:
    observation = minimal_observation(profile)
    latencies: list[float] = []
    try:
        for _ in range(max(1, samples)):
            prediction = policy.predict(observation)
            latencies.append(prediction.latency_s)
    except SequencesError as exc:
        return Check("inference", FAIL, str(exc))
    chunk = prediction.action_chunk
    infer_ms = prediction.perf.get("inference_ms")
    model = f", model {infer_ms:.0f} ms" if isinstance(infer_ms, float) else ""
    return Check(
        "inference",
        OK,
        f"{len(chunk)} x {chunk.action_dim} actions ({chunk.covers_seconds * 1000:.0f} ms of "
        f"motion), median of {len(latencies)}: {statistics.median(latencies) * 1000:.0f} ms "
        f"on one kept-alive connection{model}",
    )
