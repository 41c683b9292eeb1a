"""GatewaySimulator: a real HTTP/1.1 keep-alive server on loopback that speaks gateway v1.

Threads: one accept loop plus one daemon thread per TCP connection (``listener.Listener``).
``stop()`` closes the listening socket and every open client connection and joins all of
those threads, so a test leaves no sockets or threads behind. Everything the connections
share is one ``state.SimState`` under one lock (the latency model is described there).

Cold start: ``POST /v1/act`` answers 503 ``warming`` (body ``retry_after_s`` plus a
``Retry-After`` header, whole seconds rounded up) until ``cold_start_s`` after ``start()``;
in the default error shape its ``detail`` is the older ``{"status": "warming_up", ...}``
object, so code written for the 0.1.0 client waits it out too.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Any

from sequence_ai_core.types import FloatArray

from .catalogue import CATALOGUE, SimModel, find_model, reference_action
from .disagreement import Disagreement, resolve
from .faults import Fault
from .handler import GatewayHandler
from .listener import Listener
from .responses import ERROR_SHAPES
from .state import POLL_S, SimSettings, SimState

log = logging.getLogger(__name__)


class GatewaySimulator:
    """In-process simulated gateway. Use as a context manager or call start()/stop().

    Check order for ``POST /v1/act``: 411/413 (before the body is read) -> injected transport
    fault -> 401 -> 400 (not JSON) -> 404 (unknown model; full ids only, a short id gets a
    hint) -> 422 (observation or options) -> 503 warming -> 402 credit -> model slot.
    ``credit`` counts requests that got past those checks. ``received`` records every act
    request that passed auth and parsed as JSON, with its answer ``status`` and
    ``anchor_wall`` (the wall time step 0 is computed for). ``action_noise`` > 0 adds
    Gaussian noise seeded by the request's ``seed`` option, so a seed fixes the chunk.
    ``state_conditioned`` makes chunks start at the observed joint positions and gripper and
    follow the reference's motion from there, as a real policy predicts from the arm's state:
    a plan played late then yanks the arm back at every swap (see ``responses.chunk_values``).
    ``disagreement`` (a level name, ``"none"`` by default, or a ``Disagreement``) makes
    consecutive chunks disagree as real models' do, by a per-chunk offset, drift and now and
    then a mode switch, drawn from ``disagreement_seed`` (see ``sequence_ai_sim.disagreement``).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = "sim-key",
        latency_s: float = 0.0,
        jitter: float = 0.0,
        cold_start_s: float = 0.0,
        connect_delay_s: float = 0.0,
        workers: int = 4,
        seed: int = 0,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        credit: int | None = None,
        max_body_bytes: int = 4_000_000,
        ms_per_kb: float = 0.0,
        models: Sequence[SimModel] | None = None,
        action_noise: float = 0.0,
        state_conditioned: bool = False,
        error_shape: str = "both",
        disagreement: str | Disagreement = "none",
        disagreement_seed: int = 0,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if error_shape not in ERROR_SHAPES:
            raise ValueError(f"error_shape must be one of {ERROR_SHAPES}, got {error_shape!r}")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        self.host = host
        self._port = port
        settings = SimSettings(
            models=MappingProxyType(
                {
                    model.short_id: model
                    for model in (models if models is not None else CATALOGUE.values())
                }
            ),
            api_key=api_key,
            cold_start_s=cold_start_s,
            connect_delay_s=connect_delay_s,
            workers=workers,
            credit=credit,
            max_body_bytes=max_body_bytes,
            ms_per_kb=ms_per_kb,
            action_noise=action_noise,
            state_conditioned=state_conditioned,
            error_shape=error_shape,
            disagreement=resolve(disagreement),
            disagreement_seed=disagreement_seed,
        )
        #: Everything the connections share, under one lock.
        self.state = SimState(settings, latency_s=latency_s, jitter=jitter, seed=seed)
        self._ssl_context: ssl.SSLContext | None = None
        if tls_cert is not None and tls_key is not None:
            self._ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ssl_context.load_cert_chain(tls_cert, tls_key)
        self._server: Listener | None = None
        self._serve_thread: threading.Thread | None = None
        self.url = ""

    # ----------------------------------------------------------------- settings
    @property
    def settings(self) -> SimSettings:
        return self.state.settings

    @property
    def models(self) -> Mapping[str, SimModel]:
        return self.settings.models

    @property
    def error_shape(self) -> str:
        """One of ``responses.ERROR_SHAPES``: ``"both"`` (default) reads alike to the 0.1.0
        client and this one; ``"newer"`` and ``"older"`` are each shape alone, ``"older"`` as
        the gateway sent it when 0.1.0 was released (``{"detail": {"status": "warming_up",
        ...}}`` for a cold worker)."""
        return self.settings.error_shape

    @property
    def cold_start_s(self) -> float:
        return self.settings.cold_start_s

    @property
    def connect_delay_s(self) -> float:
        return self.settings.connect_delay_s

    @property
    def workers(self) -> int:
        return self.settings.workers

    @property
    def credit(self) -> int | None:
        return self.settings.credit

    @property
    def max_body_bytes(self) -> int:
        return self.settings.max_body_bytes

    @property
    def ms_per_kb(self) -> float:
        return self.settings.ms_per_kb

    @property
    def action_noise(self) -> float:
        """Std-dev of seeded per-request noise added to chunks (0: exact reference)."""
        return self.settings.action_noise

    @property
    def state_conditioned(self) -> bool:
        return self.settings.state_conditioned

    @property
    def disagreement(self) -> Disagreement:
        """How consecutive chunks disagree (all zero for ``"none"``: the exact reference)."""
        return self.settings.disagreement

    @property
    def disagreement_seed(self) -> int:
        return self.settings.disagreement_seed

    @property
    def received(self) -> tuple[dict[str, Any], ...]:
        """Every act request that passed auth and JSON parsing, in arrival order (a
        snapshot; ``clear_received()`` empties the log)."""
        return self.state.received()

    def clear_received(self) -> None:
        self.state.clear_received()

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> GatewaySimulator:
        if self._server is not None:
            return self
        self.state.begin()
        self._server = Listener(
            (self.host, self._port), GatewayHandler, self.state, self._ssl_context
        )
        port = self._server.server_address[1]
        scheme = "https" if self._ssl_context is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{scheme}://{host}:{port}"
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": POLL_S},
            name="sim-accept",
            daemon=True,
        )
        self._serve_thread.start()
        log.info("gateway simulator listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Close the listener and every client connection; join all threads. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self.state.end()
        server.shutdown()
        server.server_close()
        self.drop_connections()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=5.0)
        for thread in self.state.threads():
            thread.join(timeout=5.0)

    def __enter__(self) -> GatewaySimulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"GatewaySimulator(url={self.url!r}, models={len(self.models)})"

    # ----------------------------------------------------------------- control
    def inject(self, fault: Fault, *, times: int = 1) -> None:
        """Apply ``fault`` to the next ``times`` POST /v1/act requests (queued in order)."""
        self.state.add_faults(fault, times)

    def drop_connections(self) -> int:
        """Close every open client connection now, as a load balancer drops idle kept-alive
        connections; returns how many were open. The listener keeps accepting."""
        sockets = self.state.open_sockets()
        for sock in sockets:
            # socket.socket.shutdown directly: SSLSocket.shutdown would drop its SSL object
            # under a thread that may be reading from it.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        return len(sockets)

    def set_latency(self, latency_s: float, jitter: float = 0.0) -> None:
        self.state.set_latency(latency_s, jitter)

    def reference(self, model: str, t_wall: float) -> FloatArray:
        """The action ``model`` outputs for wall time ``t_wall`` (without action_noise or
        disagreement)."""
        entry = find_model(model)
        if entry is None:
            raise KeyError(model)
        return reference_action(entry, t_wall)

    def stats(self) -> dict[str, Any]:
        return self.state.stats()
