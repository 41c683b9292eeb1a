"""The engine's settings (``EngineConfig``, ``RunConfig``), their defaults and their rules.
See ``engine`` for what they configure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar, get_args

from ..limits import MAX_CONTROL_HZ, MIN_CONTROL_HZ
from ..types import Model
from .handover import DEFAULT_HANDOVER, DEFAULT_HANDOVER_RATE, HANDOVERS, Handover

#: Enough to sustain 0.50 s chunks at a 0.79 s refill, with headroom for a p99 of 2x median.
#: A ceiling, not a target: at the round-trip lag the request rate does not depend on it,
#: and the engine allows one while the gateway queues (``load``).
DEFAULT_MAX_IN_FLIGHT = 3
#: ``EngineConfig.freshness``: the whole round trip (the request floor, the default) or the
#: smallest sustainable lag (fresher plans for more requests).
Freshness = Literal["round_trip", "fresh"]
FRESHNESS: tuple[Freshness, ...] = get_args(Freshness)
DEFAULT_FRESHNESS: Freshness = "round_trip"
#: How long a driver's plan may stay empty (the arm held) before the episode ends. A refill
#: takes ~0.8 s on the real gateway; the closed loop (``prefetch=False``) waits that long on
#: every chunk, so the bound leaves room for a refill twice as slow.
DEFAULT_STALL_TIMEOUT_S = 2.0
#: How long a check of a whole chunk (``validate_chunk``) may take. Its time is part of the
#: refill, which prefetch plans for, so this bounds what a stuck check costs; a local
#: service answers well within it.
DEFAULT_CHUNK_VALIDATOR_TIMEOUT_S = 0.5


class InvalidSetting(ValueError):
    """A setting a run cannot use: ``setting`` names it (an ``EngineConfig``/``RunConfig``
    field or the ``connect()`` keyword of the same name), ``problem`` says why. A
    ``ValueError``, as these always were; a driver with its own names for the settings (the
    ROS node's parameters) reports ``setting`` under its name without parsing the text."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting = setting
        self.problem = problem


def check_control_hz(hz: float | None, setting: str = "control_hz") -> None:
    """The one rule for a playback rate a caller sets (``connect``, ``EngineConfig``, the
    node's parameter): None (the chunk's own rate) or the range a chunk may declare itself
    (``limits``), so an override can never play at a rate no chunk would be accepted at."""
    if hz is None:
        return
    if not _rate_in_range(hz):
        bounds = f"[{MIN_CONTROL_HZ:g}, {MAX_CONTROL_HZ:g}]"
        raise InvalidSetting(setting, f"must be in {bounds} Hz, got {hz!r}")


def connections_for(max_in_flight: int) -> int:
    """Connections a handle's pool needs for ``max_in_flight`` refills: one each, since a
    refill that waits for a free connection starts late by that wait, plus one for the
    catalogue lookup (``describe()``, unguarded: another thread may make it meanwhile)."""
    return max_in_flight + 1


def check_pool(max_in_flight: int, max_connections: int | None) -> None:
    """Refuse ``max_in_flight`` refills on a pool too small for them (``connections_for``);
    ``max_connections`` None is a pool of unknown size (a ``Policy`` built by hand)."""
    needed = connections_for(max_in_flight)
    if max_connections is not None and needed > max_connections:
        raise InvalidSetting(
            "max_in_flight",
            f"is {max_in_flight}, which needs {needed} connections (one per refill and one "
            f"for the catalogue) but the handle has max_connections={max_connections}: "
            f"connect(max_connections={needed}) or max_in_flight <= {max_connections - 1}",
        )


def check_stall_timeout(bound: float) -> None:
    """The one rule for ``stall_timeout_s`` (``RunConfig``, ``Episode``, ``drive``): every
    episode's empty plan is bounded, so the bound is positive and finite."""
    if isinstance(bound, bool) or not (isinstance(bound, (int, float)) and 0 < bound < math.inf):
        raise InvalidSetting("stall_timeout_s", f"must be positive and finite, got {bound!r}")


def _require(ok: bool, setting: str, problem: str) -> None:
    if not ok:
        raise InvalidSetting(setting, problem)


def _count(value: int, minimum: int) -> bool:
    return not isinstance(value, bool) and value >= minimum


def _positive_finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < math.inf


def _rate_in_range(hz: object) -> bool:
    if isinstance(hz, bool) or not isinstance(hz, (int, float)):
        return False
    return MIN_CONTROL_HZ <= hz <= MAX_CONTROL_HZ  # NaN fails the comparison


_Config = TypeVar("_Config", bound="EngineConfig")


@dataclass(frozen=True)
class EngineConfig:
    """``prefetch=False`` is the strictly closed loop (request only when nothing is left to
    play). ``control_hz`` overrides the chunk's rate; ``options`` go to ``/v1/act``.

    The control period is the engine's (``PlaybackEngine.period_s``): ``control_hz`` if
    given, else the chunks' own rate, and before the first chunk the catalogue's
    (``expected_control_hz``; ``period_s`` here is where a run starts)."""

    prefetch: bool = True
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    #: Steps of a ``fade`` or ``extrapolate`` hand-over; 0: a third of a chunk.
    smooth_seam: int = 0
    startup_timeout_s: float = 0.0
    control_hz: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds one chunk covers, from the catalogue (``Policy.describe().covers_seconds``).
    #: With it, refills before the first action are staggered so that the plan is continuous
    #: from the first action even when a chunk is shorter than the round trip.
    expected_covers_s: float | None = None
    #: ``"round_trip"`` (default): lag = the expected refill time; about one request per
    #: chunk of motion, every command about one round trip old. ``"fresh"``: anchor chunks
    #: at the smallest lag the refills sustain: fresher plans for more requests (the lag is
    #: derived in ``timing``; docs/performance.md, "Freshness costs requests").
    freshness: Freshness = DEFAULT_FRESHNESS
    #: The catalogue's rate (``Model.control_hz``): the control period until the first chunk
    #: says its own, so that a driver's waiting ticks, and with them the first observations,
    #: fall on the grid the plan plays on (an anchor off it costs up to a step at a seam).
    expected_control_hz: float | None = None
    #: Back off while the gateway queues (one request in flight; see ``load``).
    backoff: bool = True
    #: How a chunk takes over from the one before (``handover``: ``none``, ``fade``,
    #: ``extrapolate``, ``slew``, ``smooth``), in every action space. The default was chosen
    #: by measurement (docs/handover.md).
    handover: Handover = DEFAULT_HANDOVER
    #: ``slew`` and ``smooth``: the most a hand-over adds to one step, as a fraction of the
    #: largest in-chunk step of the chunks either side of the seam.
    handover_rate: float = DEFAULT_HANDOVER_RATE
    #: Trailing action dimensions that are gripper positions (pi05-droid's 8th): never
    #: blended, left out of the seam measures. The node's parameter of the same name.
    gripper_dims: int = 0
    #: The gripper dimensions the model's catalogue entry names (openpi profiles do), by
    #: index; excluded as well (``with_catalogue`` fills it).
    expected_gripper_dims: tuple[int, ...] = ()
    #: The most ``validate_chunk`` may take over one chunk (``chunk_gate``); a check that
    #: has not answered by then refuses the chunk.
    chunk_validator_timeout_s: float = DEFAULT_CHUNK_VALIDATOR_TIMEOUT_S

    def __post_init__(self) -> None:
        given: object = self.options  # run(options=...) passes anything through
        if given is None:
            object.__setattr__(self, "options", {})
        elif not isinstance(given, Mapping):
            raise TypeError(f"options must be a mapping of model options, got {given!r}")
        fresh, in_flight, seam = self.freshness, self.max_in_flight, self.smooth_seam
        _require(fresh in FRESHNESS, "freshness", f"must be one of {FRESHNESS}, got {fresh!r}")
        _require(_count(in_flight, 1), "max_in_flight", f"must be >= 1, got {in_flight}")
        _require(_count(seam, 0), "smooth_seam", f"must be >= 0, got {seam}")
        self._check_handover()
        startup = self.startup_timeout_s
        ok = math.isfinite(startup) and startup >= 0
        _require(ok, "startup_timeout_s", f"must be >= 0, got {startup}")
        covers = self.expected_covers_s
        ok = covers is None or (math.isfinite(covers) and covers > 0)
        _require(ok, "expected_covers_s", f"must be positive, got {covers}")
        check_control_hz(self.control_hz)
        check_control_hz(self.expected_control_hz, "expected_control_hz")
        bound = self.chunk_validator_timeout_s
        problem = f"must be positive and finite, got {bound!r}"
        _require(_positive_finite(bound), "chunk_validator_timeout_s", problem)

    def _check_handover(self) -> None:
        handover, rate, grippers = self.handover, self.handover_rate, self.gripper_dims
        _require(handover in HANDOVERS, "handover", f"must be one of {HANDOVERS}, got {handover!r}")
        ok = _positive_finite(rate)
        _require(ok, "handover_rate", f"must be positive and finite, got {rate!r}")
        _require(_count(grippers, 0), "gripper_dims", f"must be >= 0, got {grippers}")
        given = self.expected_gripper_dims
        ok = all(_count(index, 0) for index in given)
        _require(ok, "expected_gripper_dims", f"must be indices >= 0, got {given!r}")

    def gripper_indices(self, dim: int) -> tuple[int, ...]:
        """The gripper dimensions of ``dim``-wide actions: the trailing ``gripper_dims`` and
        the catalogue's, in order."""
        trailing = range(max(0, dim - self.gripper_dims), dim)
        return tuple(sorted({*trailing, *(i for i in self.expected_gripper_dims if i < dim)}))

    @property
    def period_s(self) -> float | None:
        """The control period a run starts at: ``control_hz``, else the catalogue's rate;
        None when neither is known (the first chunk will tell)."""
        hz = self.control_hz or self.expected_control_hz
        return 1.0 / hz if hz else None

    @property
    def played_covers_s(self) -> float | None:
        """Seconds a chunk is expected to cover as played: the catalogue's length, shorter or
        longer when ``control_hz`` plays its steps faster or slower than the model's rate."""
        covers, native = self.expected_covers_s, self.expected_control_hz
        if covers is None or not self.control_hz or not native:
            return covers
        return covers * native / self.control_hz

    def at_rate(self: _Config, hz: float | None) -> _Config:
        """This config at a source's rate (``ChunkSource.control_hz``), which wins over the
        config's, as ``run()`` documents; checked by the same rule (any source may set it)."""
        return self if hz is None or hz == self.control_hz else replace(self, control_hz=hz)

    def with_catalogue(self: _Config, model: Model | None) -> _Config:
        """This config with what the model's catalogue entry says about its chunks (their
        length and rate), where the config does not say already."""
        if model is None:
            return self
        covers, hz = self.expected_covers_s, self.expected_control_hz
        return replace(
            self,
            expected_covers_s=covers if covers is not None else expected_covers_s(model),
            expected_control_hz=hz if hz is not None else expected_control_hz(model),
            expected_gripper_dims=self.expected_gripper_dims or expected_gripper_dims(model),
        )


@dataclass(frozen=True)
class RunConfig(EngineConfig):
    """``EngineConfig`` plus the driver's own bound, for ``run()`` and the ROS node:
    ``stall_timeout_s``, how long the plan may stay empty (the arm held) before the episode
    ends with ``Stalled``."""

    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        super().__post_init__()
        check_stall_timeout(self.stall_timeout_s)

    @classmethod
    def of(cls, config: EngineConfig | None) -> RunConfig:
        """``config`` as a ``RunConfig`` (an ``EngineConfig`` gets the default bound)."""
        if isinstance(config, RunConfig):
            return config
        if config is None:
            return cls()
        return cls(**{f.name: getattr(config, f.name) for f in fields(EngineConfig)})

    def updated(self, **settings: Any) -> RunConfig:
        """This config with the settings that are not None (keywords of ``Policy.run``)."""
        given = {name: value for name, value in settings.items() if value is not None}
        return replace(self, **given) if given else self


def expected_covers_s(model: Model) -> float | None:
    """Seconds one chunk covers by the catalogue entry, or None when the entry does not say
    (no horizon or rate): the first chunk will tell, at the cost of a stall at the first
    seam for chunks shorter than the round trip."""
    covers = model.covers_seconds
    return covers if math.isfinite(covers) and covers > 0 else None


def expected_gripper_dims(model: Model) -> tuple[int, ...]:
    """The gripper dimensions the catalogue entry names (``gripper_dims``, a list of
    indices, as openpi profiles give them), or none when it names none or names them badly."""
    named = model.raw.get("gripper_dims")
    if not isinstance(named, (list, tuple)):
        return ()
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in named):
        return ()
    return tuple(named)


def expected_control_hz(model: Model) -> float | None:
    """The catalogue entry's rate, or None when it gives none a chunk could have."""
    return model.control_hz if _rate_in_range(model.control_hz) else None
