"""Each run setting has one owner and one rule: the control rate, the control period, the
connection pool. The same rule holds for ``connect()``, ``run()`` and a ``PlaybackEngine``
built by hand."""

from __future__ import annotations

import math

import pytest
from conftest import TEST_KEY

from sequence_ai_core.engine_config import EngineConfig, InvalidSetting, RunConfig
from sequence_ai_core.policy import connect
from sequence_ai_sim import GatewaySimulator


@pytest.mark.parametrize("hz", [0.5, 0.0, -15.0, 1000.5, 2000.0, math.nan, math.inf])
def test_a_control_rate_outside_1_to_1000_hz_is_refused_alike_everywhere(
    sim: GatewaySimulator, hz: float
) -> None:
    refusals = []
    for build in (
        lambda: EngineConfig(control_hz=hz),
        lambda: RunConfig(control_hz=hz),
        lambda: connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=hz),
    ):
        with pytest.raises(InvalidSetting) as info:
            build()
        assert info.value.setting == "control_hz"
        refusals.append(str(info.value))
    assert refusals == [f"control_hz must be in [1, 1000] Hz, got {hz!r}"] * 3
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize("hz", [1.0, 15, 1000.0])
def test_the_bounds_of_the_control_rate_are_taken(sim: GatewaySimulator, hz: float) -> None:
    assert EngineConfig(control_hz=hz).control_hz == hz
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=hz) as policy:
        assert policy.control_hz == hz
