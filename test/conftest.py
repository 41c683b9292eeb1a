"""Shared fixtures: a real gateway simulator on loopback and an isolated credential environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sequence_ai_core.sim import GatewaySimulator

TEST_KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No key or base URL from the developer's environment; credentials live under tmp_path."""
    for name in ("SEQUENCES_API_KEY", "SEQUENCES_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config


@pytest.fixture
def sim(clean_env: Path) -> Iterator[GatewaySimulator]:
    """A fast simulator (20 ms model latency) that requires TEST_KEY."""
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02) as server:
        yield server
