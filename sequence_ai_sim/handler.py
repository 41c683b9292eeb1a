"""The per-connection HTTP handler of the simulator: routing, checks, faults, and sending.

Nothing here logs headers: the default BaseHTTPRequestHandler stderr log is replaced by a
debug log of the request line only, so the API key can never reach a log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
import socket
import struct
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .faults import BODY_KINDS, EARLY_KINDS, Fault
from .listener import Listener
from .responses import (
    RequestRejected,
    act_body,
    check_observation,
    check_options,
    chunk_values,
    corrupt_body,
    error_body,
    html_page,
    models_body,
    observed_state,
    resolve_model,
    shaped_error_body,
)
from .state import SimSettings, SimState

log = logging.getLogger(__name__)

#: Bodies larger than max_body_bytes but below this are read and discarded so the client gets
#: a clean 413 on a connection that stays usable; beyond it the connection is closed.
_DISCARD_LIMIT = 64 * 1024 * 1024
_SLOW_PIECES = 20
_LOOPBACK = ("127.", "::1", "::ffff:127.")


class GatewayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "SequencesGatewaySim/1"
    # Headers and body are separate writes; with Nagle on, the body waits for the client's
    # delayed ACK, which would add tens of ms to every request on a kept-alive connection.
    disable_nagle_algorithm = True
    server: Listener

    # ----------------------------------------------------------------- connection
    def setup(self) -> None:
        self.state: SimState = self.server.state
        self.settings: SimSettings = self.state.settings
        self.conn_id = self.state.open_connection(self.request)
        self.conn_requests = 0
        try:
            do_handshake = getattr(self.request, "do_handshake", None)
            if do_handshake is not None:
                self.request.settimeout(10.0)
                do_handshake()
                self.request.settimeout(None)
        except BaseException:
            self.state.close_connection(self.conn_id)
            raise
        super().setup()

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                super().finish()
        finally:
            self.state.close_connection(self.conn_id)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("sim %s: %s", self.address_string(), format % args)

    def _start_request(self, *, act: bool) -> str:
        if self.conn_requests == 0 and self.settings.connect_delay_s > 0:
            # Handshake cost is paid once per new connection, before its first answer.
            self.state.wait(self.settings.connect_delay_s)
        self.conn_requests += 1
        self.state.count_request(self.conn_id, act=act)
        rid = self.headers.get("X-Seq-Request-Id")
        return rid if rid else f"sim-{secrets.token_hex(4)}"

    # ----------------------------------------------------------------- sending
    def _send(
        self,
        status: int,
        body: bytes,
        *,
        request_id: str,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        slow_s: float = 0.0,
        reset: bool = False,
        close: bool = False,
    ) -> None:
        self.state.count_status(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Seq-Request-Id", request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if reset:
            self.wfile.write(body[: len(body) // 2])
            self._abort_connection()
        elif slow_s > 0:
            self._write_slowly(body, slow_s)
        else:
            self.wfile.write(body)

    def _send_json(self, status: int, payload: Any, *, request_id: str, **kwargs: Any) -> None:
        self._send(status, json.dumps(payload).encode(), request_id=request_id, **kwargs)

    def _send_error(self, error: RequestRejected, request_id: str, **kwargs: Any) -> None:
        body = shaped_error_body(
            self.settings.error_shape,
            error.status,
            error.detail,
            request_id=request_id,
            code=error.code,
            **error.extra,
        )
        headers = {**error.headers, **kwargs.pop("headers", {})}
        self._send_json(error.status, body, request_id=request_id, headers=headers, **kwargs)

    def _write_slowly(self, body: bytes, seconds: float) -> None:
        piece = max(1, math.ceil(len(body) / _SLOW_PIECES))
        for start in range(0, len(body), piece):
            if start and self.state.wait(seconds / _SLOW_PIECES):
                self._abort_connection()
                return
            self.wfile.write(body[start : start + piece])

    def _abort_connection(self) -> None:
        """Drop the connection at once (RST), mid-response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            socket.socket.shutdown(self.request, socket.SHUT_RDWR)

    # ----------------------------------------------------------------- routing
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        rid = self._start_request(act=False)
        if url.path == "/v1/models":
            endpoint = parse_qs(url.query).get("endpoint", [None])[0]
            self._send_json(200, models_body(self.settings.models, endpoint), request_id=rid)
        elif url.path == "/sim/stats":
            if not self.client_address[0].startswith(_LOOPBACK):
                self._send_error(RequestRejected(403, "stats are loopback only"), rid)
            else:
                self._send_json(200, self.state.stats(), request_id=rid)
        elif url.path == "/v1/act":
            self._send_error(RequestRejected(405, "use POST /v1/act"), rid)
        else:
            self._send_error(RequestRejected(404, f"no route {url.path}"), rid)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        rid = self._start_request(act=path == "/v1/act")
        body = self._read_body(rid)
        if body is None:
            return
        if path != "/v1/act":
            self._send_error(RequestRejected(404 if path != "/v1/models" else 405, "no route"), rid)
            return
        fault = self.state.take_fault()
        if fault is not None and fault.kind == "timeout" and self.state.wait(fault.seconds):
            return
        if fault is not None and fault.kind in EARLY_KINDS:
            self._send_early_fault(fault, rid)
            return
        try:
            self._act(body, rid, fault)
        except RequestRejected as error:
            self._send_error(error, rid)

    def _read_body(self, rid: str) -> bytes | None:
        """The request body, or None after answering 411/413 (closing if needed)."""
        raw_length = self.headers.get("Content-Length")
        try:
            length = int(raw_length) if raw_length is not None else -1
        except ValueError:
            length = -1
        if length < 0:
            self._send_error(RequestRejected(411, "Content-Length required"), rid, close=True)
            return None
        limit = self.settings.max_body_bytes
        if length > limit:
            error = RequestRejected(413, f"body of {length} bytes exceeds {limit}")
            if length <= _DISCARD_LIMIT:
                self._discard(length)
                self._send_error(error, rid)
            else:
                self._send_error(error, rid, close=True)
            return None
        return self.rfile.read(length)

    def _discard(self, length: int) -> None:
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)

    def _send_early_fault(self, fault: Fault, rid: str) -> None:
        if fault.kind == "reset":
            self._send(
                200,
                b'{"id": "act-reset", "action_chunk": {"steps": []}}',
                request_id=rid,
                reset=True,
            )
        elif fault.kind == "html":
            self._send(
                fault.status_code,
                html_page(fault.status_code),
                request_id=rid,
                content_type="text/html",
            )
        elif fault.kind == "warming":
            warming = RequestRejected(
                503,
                "model is warming up",
                code="warming",
                headers={"Retry-After": str(math.ceil(fault.seconds))},
                retry_after_s=fault.seconds,
            )
            self._send_error(warming, rid)
        elif fault.kind == "busy":
            busy = RequestRejected(
                fault.status_code,
                "every model slot is busy",
                retry_after_s=fault.seconds or None,
                details={"reason": fault.name},
            )
            self._send_error(busy, rid)
        elif fault.kind == "not_json":
            self._send(200, b"upstream answered: ok <truncated>", request_id=rid)
        else:
            self._send_status_fault(fault, rid)

    def _send_status_fault(self, fault: Fault, rid: str) -> None:
        headers = dict(fault.headers)
        if fault.body is None:
            payload: Any = error_body(fault.status_code, "injected fault", request_id=rid)
        else:
            payload = fault.body
        if isinstance(payload, (bytes, str)):
            data = payload.encode() if isinstance(payload, str) else payload
            self._send(
                fault.status_code, data, request_id=rid, headers=headers, content_type="text/plain"
            )
        else:
            self._send_json(fault.status_code, payload, request_id=rid, headers=headers)

    # ----------------------------------------------------------------- /v1/act
    def _act(self, raw: bytes, rid: str, fault: Fault | None) -> None:
        arrival_wall, arrival = time.time(), time.monotonic()
        if not self.settings.key_ok(self.headers.get("Authorization")):
            raise RequestRejected(401, "missing or invalid API key")
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise RequestRejected(400, "body is not valid JSON", code="invalid_json") from None
        if not isinstance(request, dict):
            raise RequestRejected(400, "body must be a JSON object", code="invalid_json")
        options = {k: v for k, v in request.items() if k not in ("model", "observation")}
        serial = self.state.record(
            {
                "t": arrival,
                "model": request.get("model"),
                "observation": request.get("observation"),
                "options": options,
                "connection": self.conn_id,
                "request_id": rid,
                "status": None,
            }
        )
        try:
            self._answer_act(request, options, serial, raw, rid, fault, arrival_wall)
        except RequestRejected as error:
            self.state.update_record(serial, status=error.status)
            raise

    def _answer_act(
        self,
        request: dict[str, Any],
        options: dict[str, Any],
        serial: int,
        raw: bytes,
        rid: str,
        fault: Fault | None,
        arrival_wall: float,
    ) -> None:
        model = resolve_model(request.get("model"), self.settings.models)
        stamp_ms = check_observation(request.get("observation"))
        horizon, seed = check_options(options)
        warming_s = self.state.warming_remaining_s()
        if warming_s > 0:
            raise RequestRejected(
                503,
                f"model {model.short_id} is warming up",
                code="warming",
                retry_after_s=round(warming_s, 3),
                headers={"Retry-After": str(math.ceil(warming_s))},
            )
        if not self.state.reserve_credit():
            raise RequestRejected(
                402, "credit exhausted; top up to continue", code="insufficient_credit"
            )
        anchor = stamp_ms / 1000.0 if stamp_ms is not None else arrival_wall
        self.state.update_record(serial, anchor_wall=anchor)
        # Drawn before the model runs: requests in flight together keep their arrival order.
        draw = self.state.draw_chunk(model, anchor, seed)
        timing = self.state.run_model(len(raw))
        if timing is None:
            self.close_connection = True
            return
        steps = fault.count if fault is not None and fault.kind == "steps" else None
        count = steps if steps is not None else (horizon or model.action_horizon)
        observed = (
            observed_state(request["observation"]) if self.settings.state_conditioned else None
        )
        values = chunk_values(
            model,
            anchor,
            count,
            noise=self.settings.action_noise,
            seed=seed,
            observed=observed,
            disagreement=None if draw is None else draw.added(model, anchor, count),
        )
        usage = {
            "requests": 1,
            "credits": 1,
            "request_bytes": len(raw),
            "credit_remaining": self.state.credit_remaining(),
        }
        body = act_body(
            model,
            values,
            response_id=self.state.next_response_id(),
            inference_ms=timing[0] * 1000.0,
            queue_ms=timing[1] * 1000.0,
            usage=usage,
        )
        if fault is not None and fault.kind in BODY_KINDS:
            body = corrupt_body(body, fault)
        self.state.update_record(serial, status=200)
        slow_s = fault.seconds if fault is not None and fault.kind == "slow_body" else 0.0
        self._send_json(200, body, request_id=rid, slow_s=slow_s)
