"""The control plane's messages from the core's records, ROS-free: the typed ``RunOutcome``
(``msg/RunOutcome.msg``) and the ``RunEpisode`` action's feedback.

The message classes are handed in (the generated ones on the node), so the rules are testable
without a build. Every text is redacted of the key; counts are clamped into ``uint32``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from sequence_ai_core import RunOutcome
from sequence_ai_core.node_api import redact

#: The figures copied as they are from the core ``RunOutcome`` (the message's other fields
#: are the episode's identity, its texts and its stamp).
COUNTS = ("actions", "chunks", "underruns", "skipped_stale", "retries", "requests", "takeovers")
FIGURES = (
    "elapsed_s", "underrun_s", "max_gap_s", "max_seam_jump", "max_seam_step", "seam_step_p95",
    "latency_p50_s", "latency_p95_s", "staleness_p50_s", "staleness_p95_s", "duty_cycle",
    "takeover_s", "max_resume_s", "max_resume_jump",
)  # fmt: skip
#: The engine's phase as the action's feedback names it: an underrun holds the arm.
STATES = {
    "waiting": "waiting", "playing": "playing", "underrun": "holding", "human": "human",
    "resuming": "resuming",
}  # fmt: skip
_UINT32_MAX = 2**32 - 1
#: The ends whose detail is the outcome's error when no exception is: what was refused,
#: what went stale.
DETAILED = ("validate", "stale_input")


def _count(value: Any) -> int:
    return min(max(int(value), 0), _UINT32_MAX)


def error_text(error: BaseException | None, detail: str, secret: str | None) -> str:
    """``"<Class>: <message>"`` of the error that ended the episode, else the stop's detail
    (a refused action's reason), redacted; empty when there is neither."""
    if error is not None:
        return redact(f"{type(error).__name__}: {error}", secret)
    return redact(detail, secret)


def outcome_message(
    message_type: Callable[[], Any],
    outcome: RunOutcome,
    *,
    episode: int,
    model: str,
    stamp: Any,
    error: str,
    secret: str | None,
) -> Any:
    """A ``RunOutcome`` message of one ended episode."""
    msg = message_type()
    msg.stamp = stamp
    msg.episode = _count(episode)
    msg.model = model
    msg.reason = outcome.reason
    msg.error = error
    for name in COUNTS:
        setattr(msg, name, _count(getattr(outcome, name)))
    for name in FIGURES:
        setattr(msg, name, float(getattr(outcome, name)))
    msg.action_space = outcome.action_space or ""
    msg.recording = redact(outcome.recording or "", secret)
    msg.label = outcome.label
    return msg


def control_source(snapshot: Mapping[str, Any]) -> str:
    """Who has the arm: ``human`` while taken over, else ``policy``."""
    return "human" if snapshot.get("state") == "human" else "policy"


def feedback_state(snapshot: Mapping[str, Any]) -> str:
    """The feedback's ``state`` from an engine snapshot: ``warming`` while a cold worker
    keeps the first chunk back."""
    phase = str(snapshot.get("state", "waiting"))
    if phase == "waiting" and snapshot.get("warming"):
        return "warming"
    return STATES.get(phase, phase)


def feedback_message(
    message_type: Callable[[], Any],
    snapshot: Mapping[str, Any],
    *,
    actions: int,
    elapsed_s: float,
) -> Any:
    """The action's feedback from the live engine, the episode's committed actions and the
    time since it started."""
    msg = message_type()
    msg.state = feedback_state(snapshot)
    msg.control_source = control_source(snapshot)
    msg.actions = _count(actions)
    msg.chunks = _count(snapshot.get("chunks", 0))
    msg.underruns = _count(snapshot.get("underruns", 0))
    msg.elapsed_s = float(elapsed_s)
    for name in ("duty_cycle", "latency_p95_s", "staleness_p50_s"):
        value = snapshot.get(name, math.nan)
        setattr(msg, name, float(value) if isinstance(value, (int, float)) else math.nan)
    return msg
