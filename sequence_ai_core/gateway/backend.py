"""What a ``Policy`` talks to: the backend protocol, and the HTTP gateway behind it.

Two backends implement ``Backend``: ``GatewayBackend`` (``POST /v1/act`` on the General
Sequences gateway, over ``transport.Transport``) and ``openpi.OpenpiBackend`` (an openpi
``WebsocketPolicyServer``). ``Policy`` adds the one-driver guard, the ``next_action``
buffer and ``run()`` on top of either, so the engine, the hold rules and the key redaction
are the same whichever answers. ``connect()`` picks one by the URL's scheme.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from ..action_spaces import find_space
from ..credentials import missing_key_message
from ..errors import AuthError, InvalidRequest, InvalidResponse
from ..limits import CONTROL_HZ_TOLERANCE
from ..types import ActionChunk, Model, Observation, Prediction
from .transport import Transport
from .wire import encode_act_request, parse_models, parse_prediction

log = logging.getLogger(__name__)


class Backend(Protocol):
    """One policy server for one model. Thread-safe: the engine's workers call ``fetch``
    concurrently; every failure is a ``SequencesError`` subclass, by the request's deadline."""

    @property
    def base_url(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def requests_sent(self) -> int: ...

    def fetch(self, model: str, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        """One chunk for ``observation``, checked against ``entry`` once that is known."""

    def describe(self, model: str) -> Model:
        """The model's catalogue entry (or what stands for one); may do I/O."""

    def check_observation(self, entry: Model, observation: Observation) -> None:
        """Raise ``InvalidRequest`` for an observation the model cannot take."""

    def cancel_in_flight(self) -> int:
        """Abort the requests under way; the backend stays usable."""

    def close(self) -> None:
        """Abort requests in flight and close the connections; idempotent."""


class GatewayBackend:
    """The General Sequences gateway (docs/architecture.md §2) over one kept-alive
    ``Transport``."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._entry: Model | None = None

    def __repr__(self) -> str:
        return f"GatewayBackend({self.transport!r})"

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    @property
    def closed(self) -> bool:
        return self.transport.closed

    @property
    def requests_sent(self) -> int:
        return self.transport.requests_sent

    def cancel_in_flight(self) -> int:
        return self.transport.cancel_in_flight()

    def close(self) -> None:
        self.transport.close()

    def fetch(self, model: str, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        if not self.transport.has_key:  # the gateway would answer 401 without saying where
            raise AuthError(missing_key_message())
        body = encode_act_request(model, observation, options)
        answer, request_id, latency = self.transport.request("POST", "/v1/act", json_body=body)
        prediction = parse_prediction(
            answer, request_id=request_id, latency_s=latency, secret=self.transport.secret
        )
        self._check_against_catalogue(model, prediction.action_chunk, request_id)
        log.debug(
            "%s: %d steps in %.3fs [%s]", model, len(prediction.action_chunk), latency, request_id
        )
        return prediction

    def _check_against_catalogue(self, model: str, chunk: ActionChunk, request_id: str) -> None:
        """A chunk must have the catalogue's size and rate (once the entry is known): played
        at another rate, every step would move the arm at a speed the model never meant."""
        entry = self._entry
        if entry is None:
            return
        problem = None
        if entry.action_dim > 0 and chunk.action_dim != entry.action_dim:
            problem = f"action_dim {chunk.action_dim}, the catalogue says {entry.action_dim}"
        hz, expected = chunk.control_frequency_hz, entry.control_hz
        if expected > 0 and abs(hz - expected) > CONTROL_HZ_TOLERANCE * expected:
            problem = f"control_frequency_hz {hz:g}, the catalogue says {expected:g}"
        if problem is not None:
            raise InvalidResponse(
                f"invalid response from gateway: chunk for {model} has {problem}",
                status=200,
                request_id=request_id,
            )

    def describe(self, model: str) -> Model:
        body, request_id, _ = self.transport.request(
            "GET", "/v1/models", params={"endpoint": "act"}
        )
        entries = parse_models(body, request_id=request_id, secret=self.transport.secret)
        found = [m for m in entries if m.id == model]
        if not found:
            raise InvalidRequest(
                f"model {model} is not in the gateway's act catalogue", request_id=request_id
            )
        self._entry = found[0]
        return found[0]

    def check_observation(self, entry: Model, observation: Observation) -> None:
        check_against_entry(entry, observation)


def check_against_entry(entry: Model, observation: Observation) -> None:
    """Refuse an observation a catalogue entry cannot take (its camera views, its joint
    count), naming the field."""
    name = entry.short_id or entry.id
    views = [getattr(frame, "view", None) for frame in observation.images]
    for i, view in enumerate(views):
        if entry.camera_views and view not in entry.camera_views:
            raise InvalidRequest(
                f"observation.images[{i}].view is {view!r}; {name} takes "
                f"{', '.join(entry.camera_views)}"
            )
    # A subset of the views is taken: code written for the 0.1.0 client sent one camera
    # to two-camera models and the gateway served it. No camera at all is refused.
    if entry.camera_views and not views:
        raise InvalidRequest(
            f"observation.images is empty: {name} takes "
            f"{', '.join(entry.camera_views)} (one ImageFrame each)"
        )
    # In joint spaces the first values are joints: the observation's joint count must match.
    space = find_space(entry.raw.get("action_space"))
    joints = observation.proprioception.joint_positions
    count = len(joints) if hasattr(joints, "__len__") else -1
    dim = entry.action_dim
    if space is not None and space.joint and dim > 0 and count not in (dim - 1, dim):
        raise InvalidRequest(
            f"observation.proprioception.joint_positions has {count} values; {name} "
            f"acts on {dim} dimensions ({dim - 1} joints and a gripper, or {dim} joints)"
        )
