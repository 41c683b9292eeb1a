"""``sequence-ai doctor``: is this machine ready to drive a robot from the gateway?

Each check prints one verdict line. The key itself is never printed, only where it came from.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..credentials import missing_key_message, resolve_api_key_with_source
from ..errors import (
    AuthError,
    InvalidRequest,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Unavailable,
)
from ..gateway.transport import Transport, VerifyArg
from ..gateway.wire import encode_act_request, parse_models, parse_prediction
from ..images import encode_image
from ..types import Model, Observation, Proprioception

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str  # OK / WARN / FAIL / SKIP
    detail: str

    def line(self) -> str:
        return f"[{self.verdict:>4}] {self.name}: {self.detail}"


@dataclass
class DoctorSettings:
    base_url: str
    api_key: str | None = None
    verify: VerifyArg = True
    samples: int = 3
    model: str | None = None
    act: bool = True


def _transport(settings: DoctorSettings, key: str | None) -> Transport:
    return Transport(settings.base_url, key, timeout_s=30.0, verify=settings.verify)


def check_key(settings: DoctorSettings) -> tuple[Check, str | None]:
    try:
        key, source = resolve_api_key_with_source(settings.api_key)
    except ValueError as exc:
        return Check("API key", FAIL, str(exc)), None
    if key is None:
        return Check("API key", FAIL, missing_key_message()), None
    return Check("API key", OK, f"found in {source}"), key


def check_reachable(settings: DoctorSettings) -> tuple[Check, list[Model]]:
    transport = _transport(settings, None)
    try:
        body, _, latency = transport.request("GET", "/v1/models", params={"endpoint": "act"})
        catalogue = parse_models(body, secret=transport.secret)
    except SequencesError as exc:
        return Check("gateway reachable", FAIL, f"{settings.base_url}: {exc}"), []
    finally:
        transport.close()
    detail = f"{settings.base_url} answered in {latency * 1000:.0f} ms, {len(catalogue)} act models"
    return Check("gateway reachable", OK, detail), catalogue


def minimal_observation(model: Model) -> Observation:
    """The smallest plausible observation: zero joints, black frames for every camera."""
    black = np.zeros((8, 8, 3), dtype=np.uint8)
    frames = [encode_image(black, view=view, size=(8, 8)) for view in model.camera_views]
    joints = [0.0] * max(1, model.action_dim)
    return Observation(Proprioception(joint_positions=joints), images=frames, instruction="")


def choose_model(settings: DoctorSettings, catalogue: list[Model]) -> tuple[Check, Model | None]:
    """The model the act checks use: ``--model``, else the first act model."""
    name = "model"
    if not catalogue:
        return Check(name, FAIL, "the gateway's act catalogue is empty"), None
    chosen = [m for m in catalogue if settings.model in (None, m.id, m.short_id)]
    if not chosen:
        available = ", ".join(m.short_id for m in catalogue)
        detail = f"{settings.model} is not in the gateway's act catalogue (available: {available})"
        return Check(name, FAIL, detail), None
    model = chosen[0]
    detail = (
        f"{model.short_id}: {model.robot}, {model.action_dim} dims, "
        f"{model.covers_seconds:.2f} s per chunk at {model.control_hz:g} Hz"
    )
    return Check(name, OK, detail), model


def _timed_act(transport: Transport, model: Model) -> float:
    """One real /v1/act on ``model``, parsed and validated; its wall time in seconds."""
    body = encode_act_request(model.id, minimal_observation(model), {})
    answer, request_id, latency = transport.request("POST", "/v1/act", json_body=body)
    parse_prediction(answer, request_id=request_id, latency_s=latency, secret=transport.secret)
    return float(latency)


def check_credit(settings: DoctorSettings, key: str, model: Model) -> Check:
    name = "key valid and credit"
    if not settings.act:
        return Check(name, SKIP, "skipped (--no-act)")
    transport = _transport(settings, key)
    try:
        _timed_act(transport, model)
    except PermissionDenied as exc:
        return Check(name, FAIL, f"key may not use {model.short_id}: {exc}")
    except AuthError as exc:
        return Check(name, FAIL, f"key rejected: {exc}")
    except OutOfCredit as exc:
        return Check(name, FAIL, f"key valid, out of credit: {exc}")
    except Unavailable as exc:
        if exc.warming:
            wait = f"~{exc.retry_after_s:.0f} s" if exc.retry_after_s is not None else "a while"
            return Check(name, WARN, f"key valid; {model.short_id} is warming up ({wait})")
        return Check(name, WARN, f"could not tell: {exc}")
    except InvalidRequest as exc:
        return Check(name, WARN, f"key accepted, test request refused: {exc}")
    except SequencesError as exc:
        return Check(name, FAIL, f"test request failed: {exc}")
    finally:
        transport.close()
    return Check(name, OK, f"one act request on {model.short_id} succeeded")


def _timed_models_call(transport: Transport) -> float:
    _, _, latency = transport.request("GET", "/v1/models")
    return float(latency)


def measure_latency(
    settings: DoctorSettings, key: str | None, timed: Callable[[Transport], float]
) -> tuple[list[float], list[float]]:
    """N timed calls on one kept-alive connection, then N calls each on a new one."""
    reused: list[float] = []
    transport = _transport(settings, key)
    try:
        timed(transport)  # opens the connection; not counted
        reused = [timed(transport) for _ in range(settings.samples)]
    finally:
        transport.close()
    fresh: list[float] = []
    for _ in range(settings.samples):
        transport = _transport(settings, key)
        try:
            fresh.append(timed(transport))
        finally:
            transport.close()
    return reused, fresh


def check_latency(settings: DoctorSettings, key: str | None, model: Model | None) -> Check:
    """The model's real /v1/act round trip; only the catalogue's with ``--no-act``."""
    name = "latency"
    if model is not None and key is not None and settings.act:
        what = f"{model.short_id} act"
        timed: Callable[[Transport], float] = functools.partial(_timed_act, model=model)
    else:
        what = "catalogue only, no model time (--no-act)"
        key, timed = None, _timed_models_call
    try:
        reused, fresh = measure_latency(settings, key, timed)
    except SequencesError as exc:
        return Check(name, FAIL, f"{what}: {exc}")
    kept = statistics.median(reused)
    new = statistics.median(fresh)
    ratio = new / kept if kept > 0 else float("inf")
    detail = (
        f"{what}, median of {settings.samples}: {kept * 1000:.1f} ms on one kept-alive "
        f"connection, {new * 1000:.1f} ms on new connections ({ratio:.2f}x)"
    )
    if model is not None and settings.act:
        detail += f"; one chunk covers {model.covers_seconds * 1000:.0f} ms"
    return Check(name, OK, detail)


def run_doctor(settings: DoctorSettings, emit: Callable[[str], None] = print) -> bool:
    """Run every check, emitting one line each; True when nothing failed."""
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        emit(check.line())

    key_check, key = check_key(settings)
    record(key_check)
    reach_check, catalogue = check_reachable(settings)
    record(reach_check)
    model: Model | None = None
    if reach_check.verdict == FAIL:
        record(Check("model", SKIP, "gateway unreachable"))
    else:
        model_check, model = choose_model(settings, catalogue)
        record(model_check)
    credit_ok = False
    if key is None or model is None:
        record(Check("key valid and credit", SKIP, "needs a key, a reachable gateway and a model"))
    else:
        credit_check = check_credit(settings, key, model)
        record(credit_check)
        credit_ok = credit_check.verdict == OK
    if reach_check.verdict == FAIL:
        record(Check("latency", SKIP, "gateway unreachable"))
    elif settings.act and not credit_ok:
        record(Check("latency", SKIP, "needs an act request that succeeds"))
    else:
        record(check_latency(settings, key, model))
    failed = [c.name for c in checks if c.verdict == FAIL]
    emit("verdict: " + ("ready" if not failed else "NOT ready (" + ", ".join(failed) + ")"))
    return not failed
