"""``connect()`` and the ``Policy`` handle: one model, one backend, one kept-alive pool."""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .action_buffer import ActionBuffer
from .credentials import resolve_api_key
from .errors import ConfigurationError, SequencesError
from .gateway.backend import Backend, GatewayBackend
from .gateway.transport import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_TIMEOUT_S,
    Transport,
    VerifyArg,
    resolve_base_url,
)
from .playback.engine_config import EngineConfig, Freshness, RunConfig, check_control_hz
from .playback.outcome import RunOutcome
from .playback.runner import run_policy
from .playback.source import DriverGuard, PlannedPrefix
from .recording.config import RecordConfig
from .types import ActionChunk, FloatArray, Model, Observation, Prediction, full_model_id

if TYPE_CHECKING:
    from .openpi.backend import OpenpiBackend
    from .openpi.profiles import Profile
    from .playback.outcome import RunOutcome
    from .recording.recorder import FlightRecorder

#: URL schemes of openpi policy servers (``openpi.OpenpiBackend``).
OPENPI_SCHEMES = ("ws://", "wss://")

log = logging.getLogger(__name__)


class Policy:
    """A handle on one model. Use as a context manager, or call ``close()``.

    One Policy per control loop: a second thread driving it while another is raises at once
    (two loops sharing one buffer would interleave actions and both report success).
    """

    def __init__(
        self,
        model: str,
        backend: Backend | Transport,
        *,
        control_hz: float | None = None,
        max_connections: int | None = None,
    ) -> None:
        check_control_hz(control_hz)
        self.model = full_model_id(model)
        self.control_hz = control_hz
        #: The size of the backend's pool (``connect(max_connections=)``), None if unknown:
        #: ``run()`` refuses a ``max_in_flight`` it cannot serve (``engine_config.check_pool``).
        self.max_connections = max_connections
        self._backend: Backend = (
            GatewayBackend(backend) if isinstance(backend, Transport) else backend
        )
        self._buffer = ActionBuffer()
        self._model_info: Model | None = None
        self._describe_lock = threading.Lock()
        #: One driver at a time (``source``): threads, ``run()`` and engines all take it.
        self.guard = DriverGuard(f"Policy for {self.model}")
        #: Set by ``close()``: a run paced on another thread wakes and ends at once.
        self.closed_event = threading.Event()

    def __repr__(self) -> str:
        state = "closed" if self._backend.closed else "open"
        return f"Policy(model={self.model!r}, base_url={self._backend.base_url!r}, {state})"

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connections, aborting requests in flight; a ``run()`` on another thread
        holds and ends. Idempotent; every later call raises SequencesError."""
        self.closed_event.set()
        self._backend.close()
        self._buffer.clear()

    def cancel_requests(self) -> int:
        """Abort the requests in flight (their workers end at once); the handle stays open."""
        return self._backend.cancel_in_flight()

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
        if self._backend.closed:
            raise SequencesError(f"Policy for {self.model} is closed")

    @property
    def base_url(self) -> str:
        return self._backend.base_url

    @property
    def requests_sent(self) -> int:
        return self._backend.requests_sent

    # ------------------------------------------------------------------ requests

    @property
    def wants_planned(self) -> bool:
        """The backend conditions on the engine's plan (``source.PlanningSource``): an openpi
        profile with ``rtc``. The gateway's contract has no such field, so never there."""
        return getattr(self._backend, "wants_planned", False) is True

    def fetch(
        self,
        observation: Observation,
        options: Mapping[str, Any],
        *,
        planned: PlannedPrefix | None = None,
    ) -> Prediction:
        """One chunk from the backend (``ChunkSource``). Thread-safe and unguarded: the
        engine calls it from its workers while it holds the guard; ``predict`` is guarded.
        ``planned`` reaches only a backend that ``wants_planned``."""
        self._check_open()
        if planned is not None and self.wants_planned:
            # the Backend protocol is the gateway's too, which takes no prefix
            fetch_planned: Callable[..., Prediction] = self._backend.fetch
            return fetch_planned(self.model, observation, options, planned=planned)
        return self._backend.fetch(self.model, observation, options)

    def check_observation(self, observation: Observation) -> None:
        """Refuse an observation the model cannot take (its camera views, its joint count),
        naming the field; nothing is checked before the entry is known (``describe()``,
        which ``run()`` calls first)."""
        entry = self._model_info
        if entry is not None:
            self._backend.check_observation(entry, observation)

    def predict(self, observation: Observation, **options: Any) -> Prediction:
        """Ask the model for one action chunk."""
        with self.guard.driving():
            return self.fetch(observation, options)

    def next_action(self, observation: Observation | None = None, **options: Any) -> FloatArray:
        """Pop the next buffered action; refill from ``observation`` when the buffer is empty
        (``action_buffer``: the simple loop, which stops the arm while each refill is in
        flight; ``run()`` keeps it moving with prefetch)."""
        with self.guard.driving():
            self._check_open()
            return self._buffer.pop(observation, lambda seen: self.fetch(seen, options))

    @property
    def buffered(self) -> int:
        """Actions left in the ``next_action`` buffer."""
        return len(self._buffer)

    def describe(self) -> Model:
        """This model's catalogue entry (the gateway's ``GET /v1/models``, or what an openpi
        profile and the server's metadata say), fetched once."""
        with self._describe_lock:
            if self._model_info is None:
                self._check_open()
                self._model_info = self._backend.describe(self.model)
            return self._model_info

    def run(
        self,
        observe: Callable[[], Observation | None],
        act: Callable[[FloatArray], None],
        *,
        max_actions: int,
        validate: Callable[[FloatArray], Any] | None = None,
        validate_chunk: Callable[[ActionChunk, Observation], Any] | None = None,
        hold: Callable[[], None] | None = None,
        takeover: Callable[[], Any] | None = None,
        on_chunk: Callable[[Prediction], None] | None = None,
        on_underrun: Callable[[float], None] | None = None,
        config: EngineConfig | None = None,
        prefetch: bool | None = None,
        max_in_flight: int | None = None,
        startup_timeout_s: float | None = None,
        smooth_seam: int | None = None,
        freshness: Freshness | None = None,
        stall_timeout_s: float | None = None,
        chunk_validator_timeout_s: float | None = None,
        options: Mapping[str, Any] | None = None,
        record: str | PathLike[str] | RecordConfig | None = None,
    ) -> RunOutcome:
        """Drive ``act`` at the chunk's rate with prefetch, holding on every stop.

        The settings are one ``RunConfig`` (``EngineConfig`` plus ``stall_timeout_s``), whose
        fields document them and hold their defaults: pass ``config=``, or these keywords,
        which win over it (one left None keeps the config's value). Model options (``seed``,
        ``action_horizon``, ...) go in ``options=``; any other keyword is a ``TypeError``.
        ``record`` (a directory, or a ``recording.RecordConfig``) records the episode
        into a new rosbag2 bag there: what was observed, each chunk, each command ``act``
        received, every hold and event, and the outcome (``outcome.recording`` is its path).
        It needs the ``record`` extra (rosbags). ``validate_chunk(chunk, observation)`` checks
        each whole chunk before any step of it plays (bounded by ``chunk_validator_timeout_s``);
        a refusal ends the run like ``validate``'s. ``takeover()``, True while a person has
        the arm, pauses the policy and hands back without a jump. See ``runner.run_policy``
        for the rest.
        """
        settings = RunConfig.of(config).updated(
            prefetch=prefetch,
            max_in_flight=max_in_flight,
            startup_timeout_s=startup_timeout_s,
            smooth_seam=smooth_seam,
            freshness=freshness,
            stall_timeout_s=stall_timeout_s,
            chunk_validator_timeout_s=chunk_validator_timeout_s,
            options=options,
        )
        recorder = None if record is None else self._recorder(record)
        try:
            outcome = run_policy(
                self,
                observe,
                act,
                max_actions=max_actions,
                validate=validate,
                validate_chunk=validate_chunk,
                hold=hold,
                takeover=takeover,
                on_chunk=on_chunk,
                on_underrun=on_underrun,
                config=settings,
                **({} if recorder is None else {"journal": recorder}),
            )
        finally:
            if recorder is not None:
                recorder.close()
        if recorder is None:
            return outcome
        return replace(outcome, recording=str(recorder.path), recording_dropped=recorder.dropped)

    def _recorder(self, record: str | PathLike[str] | RecordConfig) -> FlightRecorder:
        from .recording.recorder import FlightRecorder  # the optional ``record`` extra

        try:
            views = self.describe().camera_views
        except SequencesError:
            views = ()  # the catalogue is unreadable: run() will say so, or do without
        return FlightRecorder(RecordConfig.of(record), model=self.model, views=views)


def connect(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    control_hz: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    verify: bool | str | ssl.SSLContext = True,
    allow_insecure_http: bool = False,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    profile: str | Mapping[str, Any] | Profile | None = None,
) -> Policy:
    """Open a handle on ``model``. Nothing is sent until the first request.

    The URL's scheme picks the backend: ``https://`` (or loopback ``http://``) is the
    General Sequences gateway; ``ws://`` / ``wss://`` is an openpi policy server, given as
    ``base_url=`` or in place of the model (``connect("ws://127.0.0.1:8000",
    profile="droid")``), with ``profile`` mapping observations onto its keys
    (``sequence_ai_core.openpi.profiles``; needs ``pip install 'sequence_ai_ros[openpi]'``).
    An openpi server gets only the ``api_key=`` given here, as ``Authorization: Api-Key``:
    the gateway's key from the environment or the credentials file is never sent to it.

    ``timeout_s`` is each request's absolute deadline, from its start to the last byte of
    its answer (a trickling server cannot stretch it); ``connect_timeout_s`` bounds
    connecting within it. Settings the client cannot use (a CA bundle, a proxy, a timeout)
    raise ``ConfigurationError`` here, before anything is sent.

    ``max_connections`` must cover the engine's ``max_in_flight`` refills plus one catalogue
    lookup (``engine_config.connections_for``), or a refill would wait for a free
    connection: ``run()`` refuses a ``max_in_flight`` this pool cannot serve.
    """
    if model.strip().lower().startswith(OPENPI_SCHEMES):
        base_url, model = model.strip(), ""
    url = base_url if base_url is not None else os.environ.get("SEQUENCES_BASE_URL")
    if url is not None and url.strip().lower().startswith(OPENPI_SCHEMES):
        openpi = _open_openpi(
            url.strip(),
            profile,
            api_key=api_key,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            verify=verify,
            max_connections=max_connections,
            allow_insecure=allow_insecure_http,
        )
        backend: Backend = openpi
        name = model or openpi.model_name
    else:
        if profile is not None:
            raise ValueError("profile= is for openpi servers (ws:// or wss:// URLs)")
        verify_arg: VerifyArg = verify
        backend = GatewayBackend(
            Transport(
                resolve_base_url(base_url, allow_insecure_http=allow_insecure_http),
                resolve_api_key(api_key),
                timeout_s=timeout_s,
                connect_timeout_s=connect_timeout_s,
                verify=verify_arg,
                max_connections=max_connections,
            )
        )
        name = model
    try:
        return Policy(name, backend, control_hz=control_hz, max_connections=max_connections)
    except BaseException:
        backend.close()
        raise


def _open_openpi(
    url: str, profile: str | Mapping[str, Any] | Profile | None, **settings: Any
) -> OpenpiBackend:
    try:  # lazy: websockets and msgpack are the optional ``openpi`` extra
        from .openpi.backend import open_backend
    except ImportError as exc:
        raise ConfigurationError(
            f"{url} is an openpi server: its backend needs {exc.name or 'websockets'}; "
            "pip install 'sequence_ai_ros[openpi]' (websockets, msgpack)"
        ) from None
    return open_backend(url, profile, **settings)
