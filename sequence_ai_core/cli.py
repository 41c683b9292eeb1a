"""The ``sequence-ai`` command: models, login, doctor, sim.

Exit codes: 0 success, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence

from ._version import __version__
from .catalogue import models
from .credentials import credentials_path, delete_api_key, save_api_key
from .doctor import DoctorSettings, run_doctor
from .errors import SequencesError
from .transport import resolve_base_url
from .types import Model

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _format_table(entries: Sequence[Model]) -> str:
    header = ("MODEL", "ROBOT", "ACTION SPACE", "DIM", "HZ", "HORIZON", "COVERS", "CAMERAS")
    rows = [header] + [
        (
            m.short_id,
            m.robot,
            str(m.raw.get("action_space", "")),
            str(m.action_dim),
            f"{m.control_hz:g}",
            str(m.action_horizon),
            f"{m.covers_seconds:.2f}s",
            ", ".join(m.camera_views),
        )
        for m in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _cmd_models(args: argparse.Namespace) -> int:
    entries = models(
        endpoint=args.endpoint,
        base_url=args.base_url,
        allow_insecure_http=args.allow_insecure_http,
    )
    print(_format_table(entries))
    return EXIT_OK


def _cmd_login(args: argparse.Namespace) -> int:
    if args.logout:
        removed = delete_api_key()
        print(f"removed {credentials_path()}" if removed else "no saved key to remove")
        return EXIT_OK
    key = getpass.getpass("Sequences API key (input hidden): ").strip()
    if not key:
        print("no key entered; nothing saved", file=sys.stderr)
        return EXIT_FAILURE
    path = save_api_key(key)
    print(f"saved to {path} (mode 0600)")
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.samples < 1:
        print("--samples must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    settings = DoctorSettings(
        base_url=resolve_base_url(args.base_url, allow_insecure_http=args.allow_insecure_http),
        samples=args.samples,
        model=args.model,
        act=not args.no_act,
    )
    return EXIT_OK if run_doctor(settings) else EXIT_FAILURE


def _cmd_sim(args: argparse.Namespace) -> int:
    from .sim import cli as sim_cli

    return int(sim_cli.run(args))


def _add_commands(parser: argparse.ArgumentParser, *, with_sim: bool) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    listing = commands.add_parser("models", help="list the gateway's models")
    listing.add_argument("--endpoint", default="act", help="only models serving this endpoint")
    listing.set_defaults(handler=_cmd_models)

    login = commands.add_parser("login", help="save an API key (0600) for this user")
    login.add_argument("--logout", action="store_true", help="delete the saved key")
    login.set_defaults(handler=_cmd_login)

    doctor = commands.add_parser("doctor", help="check key, gateway, credit and latency")
    doctor.add_argument("--model", help="model for the test act request (default: first)")
    doctor.add_argument("--samples", type=int, default=5, help="calls per latency measurement")
    doctor.add_argument("--no-act", action="store_true", help="skip the act request (no credit)")
    doctor.set_defaults(handler=_cmd_doctor)

    sim = commands.add_parser("sim", help="run the gateway simulator on loopback")
    if with_sim:
        # Imported only for this command, so the others work even without the simulator.
        from .sim import cli as sim_cli

        sim_cli.add_arguments(sim)
    sim.set_defaults(handler=_cmd_sim)


def build_parser(*, with_sim: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sequence-ai", description="Cloud robot policies from the command line."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--base-url", help="gateway URL (default: $SEQUENCES_BASE_URL or the public gateway)"
    )
    parser.add_argument(
        "--allow-insecure-http",
        action="store_true",
        help="allow plain http:// to a non-loopback host (sends the key unencrypted)",
    )
    _add_commands(parser, with_sim=with_sim)
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(with_sim="sim" in arguments)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse: --help/--version exit 0, usage errors 2
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "handler", None) is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except (SequencesError, ValueError) as exc:
        print(f"sequence-ai {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
