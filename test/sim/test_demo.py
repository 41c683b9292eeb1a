"""``make demo`` explains its numbers, shows progress and prints no placeholder values."""

from __future__ import annotations

import re

import pytest

from sequence_ai_sim import demo


def test_demo_explains_its_numbers_and_shows_progress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "MOTION_S", 1.0)  # the real demo plays 3 s per model
    assert demo.main() == 0
    out = capsys.readouterr().out
    for term in ("duty cycle", "underruns", "staleness", "stale steps skipped", "seam jump"):
        assert f"\n  {term}" in out, term  # each defined in the glossary
    assert "[1/4] pi05-droid" in out and "[4/4] lingbot-vla-v2-6b" in out
    # dots while each model runs, then the time it took
    assert re.search(r"\[1/4\] pi05-droid: .* beside it \.+ \d+\.\d s\n", out), out
    assert "(None)" not in out and "nan" not in out
    assert "rad/s (joint_velocity)" in out and "rad (joint_absolute)" in out
    assert out.count("largest step inside one chunk of this model") == 4
