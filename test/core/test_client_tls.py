"""Transport security: TLS always verified, plain http only to loopback, base URL order."""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import TEST_KEY

from sequence_ai_core.errors import TLSError, Unavailable
from sequence_ai_core.gateway.catalogue import models
from sequence_ai_core.gateway.transport import DEFAULT_BASE_URL, resolve_base_url
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.certificates import self_signed_cert

OBS = Observation(Proprioception([0.0] * 7))


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    return self_signed_cert(tmp_path_factory.mktemp("tls"), common_name="localhost")


@pytest.fixture
def tls_sim(clean_env: Path, self_signed: tuple[str, str]) -> Iterator[GatewaySimulator]:
    cert, key = self_signed
    with GatewaySimulator(api_key=TEST_KEY, tls_cert=cert, tls_key=key) as server:
        assert server.url.startswith("https://")
        yield server


def test_ca_bundle_path_verifies_the_gateway(
    tls_sim: GatewaySimulator, self_signed: tuple[str, str]
) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=tls_sim.url, verify=self_signed[0]) as p:
        for _ in range(3):
            assert p.predict(OBS).action_chunk.action_dim == 8
    assert tls_sim.stats()["connections"] == 1


def test_ssl_context_verifies_the_gateway(
    tls_sim: GatewaySimulator, self_signed: tuple[str, str]
) -> None:
    context = ssl.create_default_context(cafile=self_signed[0])
    assert len(models(base_url=tls_sim.url, verify=context)) == 4


def test_ssl_cert_file_is_honoured(
    tls_sim: GatewaySimulator, self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", self_signed[0])
    with connect("pi05-droid", api_key=TEST_KEY, base_url=tls_sim.url) as policy:
        assert policy.predict(OBS).action_chunk.action_dim == 8


def test_untrusted_certificate_is_refused(
    tls_sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=tls_sim.url) as policy,
        pytest.raises(TLSError, match="CERTIFICATE_VERIFY_FAILED") as raised,
    ):
        policy.predict(OBS)
    # not transient (retrying cannot help) and it says where trust comes from
    assert not isinstance(raised.value, Unavailable)
    assert "SSL_CERT_FILE" in str(raised.value) and "verify=" in str(raised.value)
    assert tls_sim.stats()["act_requests"] == 0


def test_disabling_verification_is_refused(clean_env: Path) -> None:
    with pytest.raises(ValueError, match="cannot be disabled"):
        connect("pi05-droid", base_url="https://127.0.0.1:1", verify=False)
    unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError, match="cannot be disabled"):
        connect("pi05-droid", base_url="https://127.0.0.1:1", verify=unverified)
    with pytest.raises(ValueError, match="cannot be disabled"):
        models(base_url="https://127.0.0.1:1", verify=False)


@pytest.mark.parametrize(
    "url", ["http://api.generalsequences.com", "http://10.0.0.5:8765", "http://robot.local"]
)
def test_plain_http_to_remote_hosts_is_refused(clean_env: Path, url: str) -> None:
    with pytest.raises(ValueError, match="unencrypted"):
        connect("pi05-droid", base_url=url)
    handle = connect("pi05-droid", base_url=url, allow_insecure_http=True)
    handle.close()


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765"]
)
def test_plain_http_to_loopback_is_allowed(clean_env: Path, url: str) -> None:
    assert resolve_base_url(url) == url


@pytest.mark.parametrize("url", ["ftp://host", "127.0.0.1:8765", "https://user:pw@host"])
def test_malformed_base_urls_are_refused(clean_env: Path, url: str) -> None:
    with pytest.raises(ValueError):
        resolve_base_url(url)


def test_base_url_order(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_base_url(None) == DEFAULT_BASE_URL
    monkeypatch.setenv("SEQUENCES_BASE_URL", "https://env.example/")
    assert resolve_base_url(None) == "https://env.example"
    assert resolve_base_url("https://arg.example") == "https://arg.example"
    monkeypatch.setenv("SEQUENCES_BASE_URL", "http://remote.example")
    with pytest.raises(ValueError, match="unencrypted"):
        connect("pi05-droid")


def test_models_without_a_key(sim: GatewaySimulator) -> None:
    entries = models(base_url=sim.url, endpoint="act")
    assert [m.short_id for m in entries] == [
        "pi05-droid",
        "cosmos3-edge-policy-droid",
        "lingbot-va-5b",
        "lingbot-vla-v2-6b",
    ]
    assert {m.short_id: round(m.covers_seconds, 2) for m in entries}["lingbot-vla-v2-6b"] == 0.5
