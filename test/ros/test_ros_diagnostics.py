"""The node's health (sequence_ai_ros/diagnostics.py): levels, key-values, and no key in any."""

from __future__ import annotations

from typing import Any

import pytest

from sequence_ai_core import redaction
from sequence_ai_core.errors import OutOfCredit, Unavailable
from sequence_ai_ros import diagnostics


def health(**changes: Any) -> diagnostics.Health:
    values: dict[str, Any] = {
        "lifecycle": "active", "model": "pi05-droid", "episode_running": True,
        "episode_number": 1, "actions": 5, "estop_latched": False,
    }  # fmt: skip
    values.update(changes)
    return diagnostics.Health(**values)


def test_diagnostic_levels() -> None:
    assert diagnostics.evaluate(health())[0] == diagnostics.OK
    level, message, _ = diagnostics.evaluate(health(estop_latched=True))
    assert level == diagnostics.ERROR and "e-stop" in message
    level, message, values = diagnostics.evaluate(
        health(input_problem="no joint_states received yet")
    )
    assert level == diagnostics.ERROR and "joint_states" in message
    assert ("input_problem", "no joint_states received yet") in values
    level, message, _ = diagnostics.evaluate(
        health(snapshot={"underruns": 3, "max_seam_jump": 0.01})
    )
    assert level == diagnostics.WARN and "3 underruns" in message
    level, message, _ = diagnostics.evaluate(
        health(snapshot={"underruns": 0, "max_seam_jump": 0.5})
    )
    assert level == diagnostics.WARN and "seam" in message
    from sequence_ai_ros.episode import EpisodeEnd

    stopped = EpisodeEnd(1, "raised:OutOfCredit", 4, True, "top up")
    level, message, values = diagnostics.evaluate(
        health(episode_running=False, last_end=stopped, error=OutOfCredit("no credit", status=402))
    )
    assert level == diagnostics.ERROR and "OutOfCredit" in message
    assert ("last_error", "OutOfCredit: no credit (status=402)") in values
    warm = EpisodeEnd(1, "raised:Unavailable", 4, True)
    level, message, _ = diagnostics.evaluate(
        health(
            episode_running=False,
            last_end=warm,
            error=Unavailable("cold", warming=True, retry_after_s=90),
        )
    )
    assert level == diagnostics.WARN and "retry after 90 s" in message


def test_diagnostics_redact_the_key() -> None:
    secret = "sk-test-0123456789abcdef"
    error = RuntimeError(f"server echoed {secret}")
    _, message, values = diagnostics.evaluate(
        health(input_problem=f"weird {secret}", error=error, secret=secret)
    )
    assert secret not in message and all(secret not in v for _, v in values)
    assert "***" in message


@pytest.mark.parametrize("secret", ["Zq9", "X"])
def test_diagnostics_redact_a_short_key_by_the_package_rule(secret: str) -> None:
    """Diagnostics used to skip keys under 4 characters; one rule now, the client's."""
    assert diagnostics.redact is redaction.redact
    error = RuntimeError(f"server echoed {secret}")
    _, message, values = diagnostics.evaluate(
        health(input_problem=f"weird {secret}", error=error, secret=secret)
    )
    assert secret not in message and all(secret not in v for _, v in values)
    assert redaction.redact(f"a {secret} b", secret) == "a *** b"
