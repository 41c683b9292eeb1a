"""Deterministic property tests (hypothesis, no example database) and the gateway they run
against: one simulator per module and a policy on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from sequence_ai_core.policy import Policy, connect
from sequence_ai_sim import GatewaySimulator
from support import TEST_KEY

MODEL = "lingbot-vla-v2-6b"
DIM = 7


def examples(name: str, table: dict[str, int]) -> settings:
    """``table[name]`` examples, derandomized, no deadline."""
    return settings(
        max_examples=table[name],
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewaySimulator]:
    with GatewaySimulator(api_key=TEST_KEY) as sim:
        yield sim


@pytest.fixture
def policy(gateway: GatewaySimulator) -> Iterator[Policy]:
    with connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as handle:
        yield handle
