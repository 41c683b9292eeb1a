"""The sample windows' quantiles: exactly numpy's, whichever path computes them."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sequence_ai_core.playback.stats import SMALL_WINDOW, SampleWindow, sorted_quantile

samples = st.lists(
    st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1, max_size=300
)
levels = st.sampled_from([0.0, 0.05, 0.5, 0.95, 0.99, 1.0]) | st.floats(0.0, 1.0)


@given(samples, levels)
def test_the_plain_python_quantile_is_numpys(values: list[float], q: float) -> None:
    assert sorted_quantile(sorted(values), q) == float(np.quantile(values, q))


@given(samples, levels)
def test_a_window_answers_numpys_quantile_of_its_last_samples(
    values: list[float], q: float
) -> None:
    window = SampleWindow(50)
    for value in values:
        window.add(value)
    assert window.quantile(q) == float(np.quantile(values[-50:], q))


def test_a_large_window_and_an_empty_one() -> None:
    window = SampleWindow(2 * SMALL_WINDOW)
    assert math.isnan(window.quantile(0.5))
    values = [float((i * 7919) % 1000) for i in range(2 * SMALL_WINDOW)]
    for value in values:
        window.add(value)
    assert window.quantile(0.95) == float(np.quantile(values, 0.95))
    assert math.isnan(sorted_quantile([], 0.5))
