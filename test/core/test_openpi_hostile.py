"""The openpi backend against websocket servers that misbehave (raw sockets of our own on
loopback): malformed and inconsistent frames, silence, refusals, and what the key does."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from support.faultkit import held_reprs
from support.openpi_droid import DROID, droid_observation

import sequence_ai_core as sai
from sequence_ai_core.errors import TLSError
from sequence_ai_core.openpi.codec import packb
from sequence_ai_core.openpi.errors import ServerRaised

KEY = "sk-openpi-hostile-0123456789"
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

pytestmark = pytest.mark.timeout(60)

Script = Callable[["RawPeer", socket.socket], None]


def _frame(opcode: int, payload: bytes) -> bytes:
    head = bytes([0x80 | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([size])
    elif size < 65536:
        head += bytes([126]) + size.to_bytes(2, "big")
    else:
        head += bytes([127]) + size.to_bytes(8, "big")
    return head + payload


def _read_frame(sock: socket.socket) -> bytes:
    """One client frame (masked), payload unmasked; b"" when the peer went away."""

    def exact(n: int) -> bytes:
        data = b""
        while len(data) < n:
            part = sock.recv(n - len(data))
            if not part:
                raise ConnectionError
            data += part
        return data

    first = exact(2)
    size = first[1] & 0x7F
    if size == 126:
        size = int.from_bytes(exact(2), "big")
    elif size == 127:
        size = int.from_bytes(exact(8), "big")
    mask = exact(4)
    payload = exact(size)
    return bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class RawPeer:
    """A websocket server written on raw sockets: it completes the handshake (recording the
    request's headers), sends a valid metadata frame and then runs ``script``."""

    def __init__(
        self, script: Script, *, status: int = 101, tls: ssl.SSLContext | None = None
    ) -> None:
        self.script = script
        self.status = status
        self.tls = tls
        self.headers: list[dict[str, str]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        scheme = "wss" if tls else "ws"
        self.url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            if self.tls is not None:
                conn.settimeout(5.0)
                conn = self.tls.wrap_socket(conn, server_side=True)
        with contextlib.suppress(OSError, ConnectionError), conn:
            request = b""
            while b"\r\n\r\n" not in request:
                part = conn.recv(4096)
                if not part:
                    return
                request += part
            lines = request.decode("latin-1").split("\r\n")[1:]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines if x)
            }
            self.headers.append(headers)
            if self.status != 101:
                body = f"refused {headers.get('authorization', '')}".encode()
                conn.sendall(
                    f"HTTP/1.1 {self.status} Nope\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                return
            accept = base64.b64encode(
                hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
            ).decode()
            conn.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                ).encode()
            )
            conn.sendall(_frame(0x2, packb({"name": "raw"})))
            self.script(self, conn)
            self._stop.wait(5.0)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5.0)


@contextlib.contextmanager
def raw_peer(script: Script, **kwargs: Any) -> Iterator[RawPeer]:
    peer = RawPeer(script, **kwargs)
    try:
        yield peer
    finally:
        peer.close()


def answer_with(payload: bytes, opcode: int = 0x2) -> Script:
    def script(peer: RawPeer, conn: socket.socket) -> None:
        _read_frame(conn)
        conn.sendall(_frame(opcode, payload))

    return script


def _bad_array() -> bytes:
    array = {b"__ndarray__": True, b"data": b"\x00" * 12, b"dtype": "<f4", b"shape": [10, 8]}
    return bytes(msgpack.packb({"actions": array}, use_bin_type=True))


def _object_array() -> bytes:
    array = {b"__ndarray__": True, b"data": b"\x00" * 8, b"dtype": "|O", b"shape": [1]}
    return bytes(msgpack.packb({"actions": array}, use_bin_type=True))


@pytest.mark.parametrize(
    ("payload", "opcode", "expected"),
    [
        (b"\xc1\xc1\xc1", 0x2, "not a msgpack frame"),
        (_bad_array(), 0x2, "needs 320 bytes"),
        (_object_array(), 0x2, "not numeric"),
        (b"\xff\xfe not utf-8", 0x1, "invalid frame"),
        (b"", 0x3, "invalid frame"),  # a reserved opcode: a websocket protocol error
    ],
    ids=["not-msgpack", "short-array", "object-dtype", "text-not-utf8", "reserved-opcode"],
)
def test_a_malformed_frame_is_an_invalid_response(
    payload: bytes, opcode: int, expected: str
) -> None:
    with (
        raw_peer(answer_with(payload, opcode)) as peer,
        sai.connect(peer.url, profile=DROID, timeout_s=5.0) as policy,
        pytest.raises(sai.InvalidResponse, match=expected),
    ):
        policy.predict(droid_observation())


def test_a_traceback_without_a_close_is_still_a_server_error() -> None:
    with (
        raw_peer(answer_with(b"Traceback: boom", 0x1)) as peer,
        sai.connect(peer.url, profile=DROID) as policy,
    ):
        started = time.monotonic()
        with pytest.raises(ServerRaised, match="Traceback: boom"):
            policy.predict(droid_observation())
        assert time.monotonic() - started < 3.0


def test_a_silent_server_ends_at_the_request_deadline() -> None:
    with (
        raw_peer(lambda peer, conn: None) as peer,
        sai.connect(peer.url, profile=DROID, timeout_s=1.0) as policy,
    ):
        started = time.monotonic()
        with pytest.raises(sai.Unavailable, match="deadline"):
            policy.predict(droid_observation())
        assert time.monotonic() - started < 3.0


def test_close_aborts_a_request_in_flight() -> None:
    with raw_peer(lambda peer, conn: None) as peer:
        policy = sai.connect(peer.url, profile=DROID, timeout_s=30.0)
        errors: list[BaseException] = []

        def ask() -> None:
            try:
                policy.fetch(droid_observation(), {})
            except sai.SequencesError as exc:
                errors.append(exc)

        thread = threading.Thread(target=ask)
        thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        policy.close()
        thread.join(5.0)
        assert not thread.is_alive() and time.monotonic() - started < 2.0
        assert errors and "closed" in str(errors[0])


def test_the_key_goes_in_an_api_key_header_and_nowhere_else() -> None:
    with raw_peer(answer_with(b"\xc1")) as peer:
        with sai.connect(peer.url, profile=DROID, api_key=KEY) as policy:
            with pytest.raises(sai.InvalidResponse) as caught:
                policy.predict(droid_observation())
            texts = [*held_reprs(policy), str(caught.value), repr(caught.value)]
        with (
            sai.connect(peer.url, profile=DROID) as anonymous,
            pytest.raises(sai.InvalidResponse),
        ):
            anonymous.predict(droid_observation())
    assert peer.headers[0]["authorization"] == f"Api-Key {KEY}"
    assert "authorization" not in peer.headers[1]
    assert peer.headers[0]["user-agent"].startswith("sequence-ai-ros/")
    assert all(KEY not in text for text in texts)


@pytest.mark.parametrize(("status", "error"), [(401, sai.AuthError), (403, sai.PermissionDenied)])
def test_a_refused_handshake_is_an_auth_error(status: int, error: type[Exception]) -> None:
    with (
        raw_peer(lambda peer, conn: None, status=status) as peer,
        sai.connect(peer.url, profile=DROID, api_key=KEY) as policy,
        pytest.raises(error) as caught,
    ):
        policy.describe()
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


def test_the_gateways_key_is_never_sent_to_an_openpi_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", KEY)
    with (
        raw_peer(answer_with(b"\xc1")) as peer,
        sai.connect(peer.url, profile=DROID) as policy,
        pytest.raises(sai.InvalidResponse),
    ):
        policy.predict(droid_observation())
    assert "authorization" not in peer.headers[0]


def test_a_key_over_plain_ws_to_another_host_is_refused() -> None:
    with pytest.raises(ValueError, match="unencrypted"):
        sai.connect("ws://192.0.2.1:8000", profile="droid", api_key=KEY)
    sai.connect("ws://192.0.2.1:8000", profile="droid").close()  # no key: a LAN server


def test_a_key_that_would_inject_a_header_is_refused_without_echoing_it() -> None:
    with pytest.raises(sai.SequencesError) as caught:
        sai.connect("ws://127.0.0.1:8000", profile="droid", api_key=KEY + "\r\nX-Evil: 1")
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


def test_wss_verifies_the_servers_certificate(tmp_path: Path) -> None:
    """A hosted openpi server behind TLS: trusted through verify=<CA>, else TLSError."""
    from sequence_ai_sim.certificates import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with raw_peer(answer_with(b"\xc1"), tls=context) as peer:
        assert peer.url.startswith("wss://")
        with (
            sai.connect(peer.url, profile=DROID, api_key=KEY, verify=cert) as policy,
            pytest.raises(sai.InvalidResponse),  # the TLS handshake and the websocket one passed
        ):
            policy.predict(droid_observation())
        with (
            sai.connect(peer.url, profile=DROID, api_key=KEY) as untrusting,
            pytest.raises(TLSError) as caught,
        ):
            untrusting.describe()
    assert peer.headers[0]["authorization"] == f"Api-Key {KEY}"
    assert len(peer.headers) == 1  # the untrusted server never saw the request, nor the key
    assert KEY not in str(caught.value)


def test_a_server_that_never_completes_the_handshake_is_unavailable_in_time() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # TCP accepted, nothing said
        url = f"ws://127.0.0.1:{listener.getsockname()[1]}"
        with sai.connect(url, profile=DROID, connect_timeout_s=0.5, timeout_s=5.0) as policy:
            started = time.monotonic()
            with pytest.raises(sai.Unavailable):
                policy.predict(droid_observation())
            assert time.monotonic() - started < 3.0
