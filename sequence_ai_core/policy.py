"""``connect()`` and the ``Policy`` handle: one model, one gateway, one kept-alive pool."""

from __future__ import annotations

import logging
import ssl
import threading
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .credentials import missing_key_message, resolve_api_key
from .engine_config import EngineConfig, Freshness, RunConfig
from .errors import AuthError, ChunkExhausted, InvalidRequest, InvalidResponse, SequencesError
from .limits import CONTROL_HZ_TOLERANCE, MAX_CONTROL_HZ, MIN_CONTROL_HZ
from .runner import run_policy
from .source import DriverGuard
from .transport import Transport, VerifyArg, resolve_base_url
from .types import FloatArray, Model, Observation, Prediction, full_model_id
from .wire import encode_act_request, parse_models, parse_prediction

if TYPE_CHECKING:
    from .outcome import RunOutcome
    from .types import ActionChunk

#: Action spaces whose first values are joints: the observation's joint count must match.
_JOINT_SPACES = frozenset({"joint_absolute", "joint_delta", "joint_velocity"})

log = logging.getLogger(__name__)


class Policy:
    """A handle on one model. Use as a context manager, or call ``close()``.

    One Policy per control loop: a second thread driving it while another is raises at once
    (two loops sharing one buffer would interleave actions and both report success).
    """

    def __init__(self, model: str, transport: Transport, *, control_hz: float | None = None):
        if control_hz is not None and not MIN_CONTROL_HZ <= control_hz <= MAX_CONTROL_HZ:
            bounds = f"[{MIN_CONTROL_HZ:g}, {MAX_CONTROL_HZ:g}]"
            raise ValueError(f"control_hz must be in {bounds} Hz, got {control_hz}")
        self.model = full_model_id(model)
        self.control_hz = control_hz
        self._transport = transport
        self._buffer: deque[FloatArray] = deque()
        self._model_info: Model | None = None
        self._describe_lock = threading.Lock()
        #: One driver at a time (``source``): threads, ``run()`` and engines all take it.
        self.guard = DriverGuard(f"Policy for {self.model}")
        #: Set by ``close()``: a run paced on another thread wakes and ends at once.
        self.closed_event = threading.Event()

    def __repr__(self) -> str:
        state = "closed" if self._transport.closed else "open"
        return f"Policy(model={self.model!r}, base_url={self._transport.base_url!r}, {state})"

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connections, aborting requests in flight; a ``run()`` on another thread
        holds and ends. Idempotent; every later call raises SequencesError."""
        self.closed_event.set()
        self._transport.close()
        self._buffer.clear()

    def cancel_requests(self) -> int:
        """Abort the requests in flight (their workers end at once); the handle stays open."""
        return self._transport.cancel_in_flight()

    def __enter__(self) -> Policy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._transport.closed:
            raise SequencesError(f"Policy for {self.model} is closed")

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    @property
    def requests_sent(self) -> int:
        return self._transport.requests_sent

    # ------------------------------------------------------------------ requests

    def fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        """One POST /v1/act (``ChunkSource``). Thread-safe and unguarded: the engine calls it
        from its workers while it holds the guard; ``predict`` is the guarded call."""
        self._check_open()
        if not self._transport.has_key:  # the gateway would answer 401 without saying where
            raise AuthError(missing_key_message())
        body = encode_act_request(self.model, observation, options)
        answer, request_id, latency = self._transport.request("POST", "/v1/act", json_body=body)
        prediction = parse_prediction(answer, request_id=request_id, latency_s=latency)
        self._check_against_catalogue(prediction.action_chunk, request_id)
        log.debug(
            "%s: %d steps in %.3fs [%s]",
            self.model,
            len(prediction.action_chunk),
            latency,
            request_id,
        )
        return prediction

    def _check_against_catalogue(self, chunk: ActionChunk, request_id: str) -> None:
        """A chunk must have the catalogue's size and rate (once the entry is known): played
        at another rate, every step would move the arm at a speed the model never meant."""
        entry = self._model_info
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
                f"invalid response from gateway: chunk for {self.model} has {problem}",
                status=200,
                request_id=request_id,
            )

    def check_observation(self, observation: Observation) -> None:
        """Refuse an observation the model's catalogue entry cannot take (its camera views,
        its joint count), naming the field; nothing is checked before the entry is known
        (``describe()``, which ``run()`` calls first)."""
        entry = self._model_info
        if entry is None:
            return
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
        space = entry.raw.get("action_space")
        joints = observation.proprioception.joint_positions
        count = len(joints) if hasattr(joints, "__len__") else -1
        dim = entry.action_dim
        if space in _JOINT_SPACES and dim > 0 and count not in (dim - 1, dim):
            raise InvalidRequest(
                f"observation.proprioception.joint_positions has {count} values; {name} "
                f"acts on {dim} dimensions ({dim - 1} joints and a gripper, or {dim} joints)"
            )

    def predict(self, observation: Observation, **options: Any) -> Prediction:
        """Ask the model for one action chunk."""
        with self.guard.driving():
            return self.fetch(observation, options)

    def next_action(self, observation: Observation | None = None, **options: Any) -> FloatArray:
        """Pop the next buffered action; refill from ``observation`` when the buffer is empty.

        This is the simple loop (it stops the arm while each refill is in flight); ``run()``
        keeps it moving with prefetch.
        """
        with self.guard.driving():
            self._check_open()
            if not self._buffer:
                if observation is None:
                    raise ChunkExhausted(
                        "action buffer is empty and no observation was given; "
                        "pass observation= on every call"
                    )
                prediction = self.fetch(observation, options)
                self._buffer.extend(prediction.action_chunk.steps)
            return self._buffer.popleft()

    @property
    def buffered(self) -> int:
        """Actions left in the ``next_action`` buffer."""
        return len(self._buffer)

    def describe(self) -> Model:
        """This model's catalogue entry (GET /v1/models?endpoint=act), fetched once."""
        with self._describe_lock:
            if self._model_info is None:
                self._check_open()
                body, request_id, _ = self._transport.request(
                    "GET", "/v1/models", params={"endpoint": "act"}
                )
                entries = parse_models(body, request_id=request_id)
                found = [m for m in entries if m.id == self.model]
                if not found:
                    raise InvalidRequest(
                        f"model {self.model} is not in the gateway's act catalogue",
                        request_id=request_id,
                    )
                self._model_info = found[0]
            return self._model_info

    def run(
        self,
        observe: Callable[[], Observation | None],
        act: Callable[[FloatArray], None],
        *,
        max_actions: int,
        validate: Callable[[FloatArray], Any] | None = None,
        hold: Callable[[], None] | None = None,
        on_chunk: Callable[[Prediction], None] | None = None,
        on_underrun: Callable[[float], None] | None = None,
        config: EngineConfig | None = None,
        prefetch: bool | None = None,
        max_in_flight: int | None = None,
        startup_timeout_s: float | None = None,
        smooth_seam: int | None = None,
        freshness: Freshness | None = None,
        stall_timeout_s: float | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> RunOutcome:
        """Drive ``act`` at the chunk's rate with prefetch, holding on every stop.

        The settings are one ``RunConfig`` (``EngineConfig`` plus ``stall_timeout_s``), whose
        fields document them and hold their defaults: pass ``config=``, or these keywords,
        which win over it (one left None keeps the config's value). Model options (``seed``,
        ``action_horizon``, ...) go in ``options=``; any other keyword is a ``TypeError``.
        See ``runner.run_policy`` for the rest.
        """
        settings = RunConfig.of(config).updated(
            prefetch=prefetch,
            max_in_flight=max_in_flight,
            startup_timeout_s=startup_timeout_s,
            smooth_seam=smooth_seam,
            freshness=freshness,
            stall_timeout_s=stall_timeout_s,
            options=options,
        )
        return run_policy(
            self,
            observe,
            act,
            max_actions=max_actions,
            validate=validate,
            hold=hold,
            on_chunk=on_chunk,
            on_underrun=on_underrun,
            config=settings,
        )


def connect(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    control_hz: float | None = None,
    timeout_s: float = 30.0,
    connect_timeout_s: float = 5.0,
    verify: bool | str | ssl.SSLContext = True,
    allow_insecure_http: bool = False,
    max_connections: int = 8,
) -> Policy:
    """Open a handle on ``model``. Nothing is sent until the first request.

    ``timeout_s`` is each request's absolute deadline, from its start to the last byte of
    its answer (a trickling server cannot stretch it); ``connect_timeout_s`` bounds
    connecting within it. Settings the client cannot use (a CA bundle, a proxy, a timeout)
    raise ``ConfigurationError`` here, before anything is sent.

    ``max_connections`` must cover the engine's ``max_in_flight`` refills plus one catalogue
    lookup, or a refill would wait for a free connection.
    """
    verify_arg: VerifyArg = verify
    transport = Transport(
        resolve_base_url(base_url, allow_insecure_http=allow_insecure_http),
        resolve_api_key(api_key),
        timeout_s=timeout_s,
        connect_timeout_s=connect_timeout_s,
        verify=verify_arg,
        max_connections=max_connections,
    )
    try:
        return Policy(model, transport, control_hz=control_hz)
    except BaseException:
        transport.close()
        raise
