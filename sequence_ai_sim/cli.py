"""``sequence-ai sim``: run the gateway simulator until SIGINT/SIGTERM.

Also runnable as ``python -m sequence_ai_sim``. The ``sequence-ai`` command loads this module
by name for ``sim`` (``SERVED_ELSEWHERE`` in ``sequence_ai_core.tools.cli``): it has the
``add_arguments`` and ``run`` that table asks for.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import signal
import sys
import threading
from types import FrameType
from typing import Any

from sequence_ai_core.gateway.transport import resolve_base_url
from sequence_ai_core.tools.cli import OneLineErrorParser

from .responses import ERROR_SHAPES
from .server import GatewaySimulator

KEY_ENV = "SEQUENCES_SIM_API_KEY"
#: Median end-to-end /v1/act latency measured on the real gateway (pi05-droid, warm worker).
#: The default, so that a first run shows the refill gap the engine exists to hide.
MEASURED_LATENCY_S = 0.79


def _number(kind: type[float] | type[int], minimum: float, what: str) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


def _port(text: str) -> int:
    port = _number(int, 0, "a port number")(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0..65535)")
    return int(port)


SECONDS = _number(float, 0.0, "a number of seconds >= 0")
NON_NEGATIVE = _number(float, 0.0, "a number >= 0")
COUNT = _number(int, 0, "a whole number >= 0")
AT_LEAST_ONE = _number(int, 1, "a whole number >= 1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=_port, default=8765, help="port; 0 picks a free one")
    parser.add_argument(
        "--api-key", default=None, help=f"key clients must send (default: ${KEY_ENV})"
    )
    parser.add_argument("--no-auth", action="store_true", help="accept requests without a key")
    parser.add_argument(
        "--latency",
        type=SECONDS,
        default=MEASURED_LATENCY_S,
        metavar="SECONDS",
        help=f"median model latency per act request (default {MEASURED_LATENCY_S}, the real "
        "gateway's measured median; 0 for none)",
    )
    parser.add_argument(
        "--jitter",
        type=NON_NEGATIVE,
        default=0.0,
        metavar="FRACTION",
        help="lognormal sigma of the latency (0.3: p99 ~ 2x median)",
    )
    parser.add_argument(
        "--cold-start",
        type=SECONDS,
        default=0.0,
        metavar="SECONDS",
        help="answer 503 warming for this long after start",
    )
    parser.add_argument(
        "--error-shape",
        choices=ERROR_SHAPES,
        default="both",
        help='error bodies: both (default) is the newer shape ({"detail", "code", '
        '"retry_after_s", ...}) with a cold worker\'s detail as the older object, so the '
        "sequence-ai 0.1.0 client and this one both see it warming; newer is that shape "
        "alone (detail is text); older is the shape the gateway sent when 0.1.0 was released "
        '({"detail": {"status": "warming_up", "retry_after_s", ...}} for a cold worker, text '
        "otherwise)",
    )
    parser.add_argument(
        "--connect-delay",
        type=SECONDS,
        default=0.0,
        metavar="SECONDS",
        help="extra cost of each new connection (handshake)",
    )
    parser.add_argument(
        "--workers", type=AT_LEAST_ONE, default=4, help="model slots; more requests queue"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the latency sampler")
    parser.add_argument(
        "--credit",
        type=COUNT,
        default=None,
        help="act requests allowed before 402 (default unlimited)",
    )
    parser.add_argument(
        "--ms-per-kb",
        type=NON_NEGATIVE,
        default=0.0,
        help="latency added per kB of request body (real gateway: ~16)",
    )
    parser.add_argument("--tls-cert", default=None, metavar="FILE", help="PEM certificate")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key")
    from .disagreement import LEVELS

    parser.add_argument(
        "--disagreement",
        choices=tuple(LEVELS),
        default="none",
        help="how consecutive chunks disagree, as real models' do: none (the exact reference, "
        "default), calibrated (per-chunk offset sd 20 mrad and drift sd 20 mrad/s per joint; "
        "0.05 rad/s and 0.05 rad/s^2 for velocity models), mode_switch (calibrated, plus 1 "
        "chunk in 10 following the reference shifted by +-0.5 s)",
    )
    parser.add_argument(
        "--disagreement-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the disagreement draws (same seed and requests: same chunks)",
    )


def _simulator(args: argparse.Namespace, api_key: str | None) -> GatewaySimulator:
    return GatewaySimulator(
        host=args.host,
        port=args.port,
        api_key=api_key,
        latency_s=args.latency,
        jitter=args.jitter,
        cold_start_s=args.cold_start,
        error_shape=args.error_shape,
        connect_delay_s=args.connect_delay,
        workers=args.workers,
        seed=args.seed,
        credit=args.credit,
        ms_per_kb=args.ms_per_kb,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        disagreement=args.disagreement,
        disagreement_seed=args.disagreement_seed,
    )


def _usage_error(args: argparse.Namespace) -> str | None:
    """The first mistake in the arguments, as one line; None when they are usable."""
    if args.no_auth and args.api_key:
        return "--no-auth and --api-key contradict each other; give one"
    if not args.no_auth and not (args.api_key or os.environ.get(KEY_ENV)):
        return f"give --api-key KEY, set ${KEY_ENV}, or pass --no-auth"
    if (args.tls_cert is None) != (args.tls_key is None):
        return "--tls-cert and --tls-key go together"
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not os.path.isfile(path):
            return f"{flag} file not found: {os.path.abspath(path)}"
    return None


def banner(sim: GatewaySimulator, args: argparse.Namespace) -> list[str]:
    """What a user needs to point a client at this simulator, and how to stop it."""
    if args.no_auth:
        key = "anything   # auth is off, but clients refuse to send without a key"
    elif args.api_key:
        key = shlex.quote(args.api_key)
    else:
        key = f'"${KEY_ENV}"'
    latency = f"{args.latency:g} s median" if args.latency > 0 else "none"
    shape = "" if sim.error_shape == "both" else f", {sim.error_shape} error bodies only"
    lines = [
        f"gateway simulator on {sim.url} (auth {'off' if args.no_auth else 'on'}, "
        f"model latency {latency}, cold start {args.cold_start:g} s{shape})",
        "point a client at it, in another shell:",
        f"  export SEQUENCES_BASE_URL={sim.url}",
        f"  export SEQUENCES_API_KEY={key}",
    ]
    try:
        resolve_base_url(sim.url)
    except ValueError:  # plain http to a host that is not loopback
        lines.append("  (plain http off loopback: clients need --allow-insecure-http or TLS)")
    lines.append("models:")
    for model in sim.models.values():
        lines.append(
            f"  {model.short_id:<26} {model.action_space} x{model.action_dim}  "
            f"{model.control_hz:g} Hz x {model.action_horizon} = {model.covers_seconds:.2f} s"
        )
    lines.append("stop with Ctrl-C (or SIGTERM)")
    return lines


def run(args: argparse.Namespace) -> int:
    problem = _usage_error(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    api_key = None if args.no_auth else (args.api_key or os.environ.get(KEY_ENV))
    try:
        sim = _simulator(args, api_key).start()
    except (OSError, ValueError, OverflowError) as error:
        print(
            f"error: cannot start the simulator on {args.host}:{args.port}: {error}",
            file=sys.stderr,
        )
        return 1
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print("\n".join(banner(sim, args)), flush=True)
        while not done.wait(0.5):
            pass
    finally:
        sim.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("gateway simulator stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m sequence_ai_sim", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
