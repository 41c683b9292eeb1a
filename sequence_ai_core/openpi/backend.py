"""The openpi backend: a ``backend.Backend`` over an openpi ``WebsocketPolicyServer``.

An observation is mapped by the profile (``profiles``), sent as one msgpack-numpy frame,
and answered by ``{"actions": (horizon, dim), "server_timing": {...}}``. The answer carries
no rate, action space or dimension meaning, so every answer is checked against the
profile: a 2-D finite numeric array of the profile's dimension (and horizon, if it sets
one) within the chunk caps of ``limits``, else ``InvalidResponse`` and nothing is played.
The server's ``infer_ms`` is reported as ``perf["inference_ms"]``, so the engine's load
monitor separates the model's time from queueing behind other connections. A profile with
``rtc`` also sends the engine's planned prefix and delay (``rtc``), and the engine hands it
that with each request (``wants_planned``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..credentials import checked_api_key
from ..endpoints import OPENPI, checked_url
from ..errors import InvalidRequest, InvalidResponse
from ..gateway.connections import VerifyArg, checked_timeout, ssl_context_for
from ..limits import MAX_CHUNK_VALUES, MAX_STEPS
from ..types import ActionChunk, Model, Observation, Prediction
from .client import OpenpiClient, check_health
from .codec import CodecError, packb
from .profiles import Profile
from .user_profiles import load_profile

if TYPE_CHECKING:
    from ..playback.source import PlannedPrefix


class OpenpiBackend:
    """One openpi policy server, one profile; thread-safe."""

    def __init__(self, client: OpenpiClient, profile: Profile) -> None:
        self.client = client
        self.profile = profile

    def __repr__(self) -> str:
        return f"OpenpiBackend({self.client!r}, profile={self.profile.name!r})"

    @property
    def model_name(self) -> str:
        return f"openpi/{self.profile.name}"

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def closed(self) -> bool:
        return self.client.closed

    @property
    def requests_sent(self) -> int:
        return self.client.requests_sent

    @property
    def wants_planned(self) -> bool:
        """The profile sends the engine's planned prefix (``rtc``)."""
        return self.profile.rtc is not None

    def cancel_in_flight(self) -> int:
        return self.client.cancel_in_flight()

    def close(self) -> None:
        self.client.close()

    def health(self, timeout_s: float = 5.0) -> tuple[int, float]:
        """``GET /healthz``: (status, seconds)."""
        return check_health(self.base_url, ssl_context=self.client.ssl_context, timeout_s=timeout_s)

    def check_observation(self, entry: Model, observation: Observation) -> None:
        self.profile.check(observation)

    def describe(self, model: str) -> Model:
        metadata = self.client.server_metadata()
        profile = self.profile
        return Model(
            id=model,
            short_id=profile.name,
            endpoint="act",
            architecture="openpi",
            robot=profile.robot,
            action_dim=profile.action_dim,
            action_horizon=profile.action_horizon or 0,
            control_hz=profile.control_hz,
            camera_views=profile.views,
            raw={
                "action_space": profile.action_space,
                "gripper_dims": list(profile.gripper_dims),
                "backend": "openpi",
                "server_metadata": metadata,
            },
        )

    def fetch(
        self,
        model: str,
        observation: Observation,
        options: Mapping[str, Any],
        *,
        planned: PlannedPrefix | None = None,
    ) -> Prediction:
        if any(value is not None for value in options.values()):
            raise InvalidRequest(
                f"openpi servers take no request options, got {sorted(options)}; "
                "what the policy needs goes in the observation (the profile)"
            )
        try:
            frame = packb(self.profile.encode(observation, planned))
        except CodecError as exc:
            raise InvalidRequest(str(exc)) from None
        answer, request_id, latency = self.client.exchange(frame)
        rtc = self.profile.rtc
        skip = 0 if rtc is None else rtc.skipped(planned)
        chunk = parse_answer(answer, self.profile, request_id, skip=skip)
        return Prediction(
            id=request_id,
            model=model,
            action_chunk=chunk,
            perf=_perf(answer),
            request_id=request_id,
            latency_s=latency,
        )


def parse_answer(answer: Any, profile: Profile, request_id: str, *, skip: int = 0) -> ActionChunk:
    """The answer's ``actions`` as a checked chunk with the profile's rate and space, less its
    first ``skip`` steps (an RTC answer that starts at the observation, ``rtc``)."""

    def invalid(what: str) -> InvalidResponse:
        return InvalidResponse(
            f"invalid response from openpi server: {what} (profile {profile.name})",
            request_id=request_id,
        )

    if not isinstance(answer, Mapping) or "actions" not in answer:
        raise invalid("the answer is not a map with 'actions'")
    actions = answer["actions"]
    if not isinstance(actions, np.ndarray) or actions.dtype.kind not in "iuf":
        raise invalid("'actions' is not a numeric array")
    if actions.ndim != 2:
        raise invalid(f"'actions' has shape {actions.shape}, not (horizon, dim)")
    steps, dim = actions.shape
    if dim != profile.action_dim:
        raise invalid(f"'actions' has {dim} dimensions, the profile says {profile.action_dim}")
    if not 1 <= steps <= MAX_STEPS or steps * dim > MAX_CHUNK_VALUES:
        raise invalid(f"'actions' has {steps} steps (1..{MAX_STEPS}, {MAX_CHUNK_VALUES} values)")
    if profile.action_horizon is not None and steps != profile.action_horizon:
        raise invalid(f"'actions' has {steps} steps, the profile says {profile.action_horizon}")
    if skip >= steps:
        raise invalid(f"'actions' has {steps} steps, none after the {skip}-step delay")
    values = actions.astype(np.float64)
    if not np.all(np.isfinite(values)):  # all of it: a broken answer is refused whole
        raise invalid("'actions' holds non-finite values")
    if skip:
        values = values[skip:].copy()
        steps = len(values)
    values.setflags(write=False)
    return ActionChunk(
        steps=values,
        robot=profile.robot,
        action_space=profile.action_space,
        action_dim=dim,
        control_frequency_hz=profile.control_hz,
        covers_seconds=steps / profile.control_hz,
    )


def _perf(answer: Mapping[str, Any]) -> dict[str, float]:
    timing = answer.get("server_timing")
    perf: dict[str, float] = {}
    if isinstance(timing, Mapping):
        for theirs, ours in (("infer_ms", "inference_ms"), ("prev_total_ms", "prev_total_ms")):
            value = timing.get(theirs)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                continue
            if math.isfinite(float(value)) and float(value) >= 0:
                perf[ours] = float(value)
    return perf


def open_backend(
    url: str,
    profile: str | Mapping[str, Any] | Profile | None,
    *,
    api_key: str | None,
    timeout_s: float,
    connect_timeout_s: float,
    verify: VerifyArg,
    max_connections: int,
    allow_insecure: bool = False,
) -> OpenpiBackend:
    """Check the URL and the profile (nothing is sent) and return the backend."""
    api_key = checked_api_key(api_key)
    parts = checked_url(url, OPENPI, sends_key=bool(api_key), allow_insecure=allow_insecure)
    if profile is None:
        raise ValueError("an openpi server needs profile= (droid, aloha, libero, or a mapping)")
    chosen = load_profile(profile)
    # openpi serves on 8000 by default; a hosted wss:// endpoint is on 443 like any other
    default_port = parts.port is None and parts.scheme == "ws"
    netloc = f"{parts.netloc}:8000" if default_port else parts.netloc
    client = OpenpiClient(
        f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}",
        api_key,
        ssl_context=ssl_context_for(verify) if parts.scheme == "wss" else None,
        timeout_s=checked_timeout(timeout_s, "timeout_s"),
        connect_timeout_s=checked_timeout(connect_timeout_s, "connect_timeout_s"),
        max_connections=max_connections,
    )
    return OpenpiBackend(client, chosen)
