"""``connect()`` and the ``Policy`` handle: one model, one gateway, one kept-alive pool."""

from __future__ import annotations

import contextlib
import logging
import math
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .credentials import missing_key_message, resolve_api_key
from .errors import AuthError, ChunkExhausted, InvalidRequest, SequencesError
from .transport import Transport, VerifyArg, resolve_base_url
from .types import FloatArray, Model, Observation, Prediction, full_model_id
from .wire import encode_act_request, parse_models, parse_prediction

if TYPE_CHECKING:
    from .outcome import RunOutcome

log = logging.getLogger(__name__)


class Policy:
    """A handle on one model. Use as a context manager, or call ``close()``.

    One Policy per control loop: a second thread driving it while another is raises at once
    (two loops sharing one buffer would interleave actions and both report success).
    """

    def __init__(self, model: str, transport: Transport, *, control_hz: float | None = None):
        if control_hz is not None and (not math.isfinite(control_hz) or control_hz <= 0):
            raise ValueError(f"control_hz must be a positive finite number, got {control_hz}")
        self.model = full_model_id(model)
        self.control_hz = control_hz
        self._transport = transport
        self._buffer: deque[FloatArray] = deque()
        self._model_info: Model | None = None
        self._describe_lock = threading.Lock()
        self._guard_lock = threading.Lock()
        self._driver: int | None = None
        self._depth = 0

    def __repr__(self) -> str:
        state = "closed" if self._transport.closed else "open"
        return f"Policy(model={self.model!r}, base_url={self._transport.base_url!r}, {state})"

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connections. Idempotent; every later call raises SequencesError."""
        self._transport.close()
        self._buffer.clear()

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

    # ------------------------------------------------------------------ one-driver guard

    @contextlib.contextmanager
    def _driving(self) -> Iterator[None]:
        """Mark the calling thread as this handle's driver; re-entrant on the same thread."""
        me = threading.get_ident()
        with self._guard_lock:
            if self._driver is not None and self._driver != me:
                raise SequencesError(
                    f"Policy for {self.model} is already driven by another thread; "
                    "use one Policy per control loop"
                )
            self._driver = me
            self._depth += 1
        try:
            yield
        finally:
            with self._guard_lock:
                self._depth -= 1
                if self._depth == 0:
                    self._driver = None

    # ------------------------------------------------------------------ requests

    def _fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        """One POST /v1/act. Thread-safe and unguarded: the engine calls it from workers."""
        self._check_open()
        if not self._transport.has_key:  # the gateway would answer 401 without saying where
            raise AuthError(missing_key_message())
        body = encode_act_request(self.model, observation, options)
        answer, request_id, latency = self._transport.request("POST", "/v1/act", json_body=body)
        prediction = parse_prediction(answer, request_id=request_id, latency_s=latency)
        log.debug(
            "%s: %d steps in %.3fs [%s]",
            self.model,
            len(prediction.action_chunk),
            latency,
            request_id,
        )
        return prediction

    def predict(self, observation: Observation, **options: Any) -> Prediction:
        """Ask the model for one action chunk."""
        with self._driving():
            return self._fetch(observation, options)

    def next_action(self, observation: Observation | None = None, **options: Any) -> FloatArray:
        """Pop the next buffered action; refill from ``observation`` when the buffer is empty.

        This is the simple loop (it stops the arm while each refill is in flight); ``run()``
        keeps it moving with prefetch.
        """
        with self._driving():
            self._check_open()
            if not self._buffer:
                if observation is None:
                    raise ChunkExhausted(
                        "action buffer is empty and no observation was given; "
                        "pass observation= on every call"
                    )
                prediction = self._fetch(observation, options)
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
        **kwargs: Any,
    ) -> RunOutcome:
        """Drive ``act`` at the chunk's rate with prefetch; see ``runner.run_policy``."""
        from .runner import run_policy

        return run_policy(self, observe, act, max_actions=max_actions, **kwargs)


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
