"""``sequence-ai sim``: run the gateway simulator until SIGINT/SIGTERM.

Also runnable as ``python -m sequence_ai_core.sim``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from .server import GatewaySimulator

KEY_ENV = "SEQUENCES_SIM_API_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one")
    parser.add_argument(
        "--api-key", default=None, help=f"key clients must send (default: ${KEY_ENV})"
    )
    parser.add_argument("--no-auth", action="store_true", help="accept requests without a key")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="median model latency per act request",
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="lognormal sigma of the latency (0.3: p99 ~ 2x median)",
    )
    parser.add_argument(
        "--cold-start",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="answer 503 warming for this long after start",
    )
    parser.add_argument(
        "--connect-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="extra cost of each new connection (handshake)",
    )
    parser.add_argument("--workers", type=int, default=4, help="model slots; more requests queue")
    parser.add_argument("--seed", type=int, default=0, help="seed of the latency sampler")
    parser.add_argument(
        "--credit",
        type=int,
        default=None,
        help="act requests allowed before 402 (default unlimited)",
    )
    parser.add_argument(
        "--ms-per-kb",
        type=float,
        default=0.0,
        help="latency added per kB of request body (real gateway: ~16)",
    )
    parser.add_argument("--tls-cert", default=None, metavar="FILE", help="PEM certificate")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key")


def _simulator(args: argparse.Namespace, api_key: str | None) -> GatewaySimulator:
    return GatewaySimulator(
        host=args.host,
        port=args.port,
        api_key=api_key,
        latency_s=args.latency,
        jitter=args.jitter,
        cold_start_s=args.cold_start,
        connect_delay_s=args.connect_delay,
        workers=args.workers,
        seed=args.seed,
        credit=args.credit,
        ms_per_kb=args.ms_per_kb,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


def run(args: argparse.Namespace) -> int:
    api_key = args.api_key or os.environ.get(KEY_ENV) or None
    if api_key is None and not args.no_auth:
        print(f"error: give --api-key, set ${KEY_ENV}, or pass --no-auth", file=sys.stderr)
        return 2
    if (args.tls_cert is None) != (args.tls_key is None):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        sim = _simulator(args, api_key).start()
    except (OSError, ValueError) as error:
        print(f"error: cannot start the simulator: {error}", file=sys.stderr)
        return 1
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"gateway simulator on {sim.url} (auth {'on' if api_key else 'off'})", flush=True)
        for model in sim.models.values():
            print(
                f"  {model.id}  {model.action_space} x{model.action_dim}  "
                f"{model.control_hz:g} Hz x {model.action_horizon} = "
                f"{model.covers_seconds:.2f} s",
                flush=True,
            )
        while not done.wait(0.5):
            pass
    finally:
        sim.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("gateway simulator stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sequence-ai sim", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
