"""The ``sequence-ai`` command: models, login, doctor, sim, report.

Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted. Every mistake is reported
as one line on stderr that says what to do, never as a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from .._version import __version__
from ..credentials import credentials_path, delete_api_key, resolve_api_key, save_api_key
from ..errors import SequencesError
from ..gateway.catalogue import models
from ..gateway.transport import resolve_base_url
from ..redaction import redact
from ..types import Model
from .doctor import DoctorSettings, run_doctor

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class ServedElsewhere:
    """A command whose code is another package's: the module that serves it, which has
    ``add_arguments(parser)`` and ``run(args) -> int``, and the help line listed here."""

    module: str
    help: str


#: Commands served by other packages of this distribution, or by modules of an optional
#: extra, by name. The simulator depends on the client, so no client module imports it; the
#: report needs the ``report`` extra: this table names the module that serves each command,
#: as an entry point would, and ``main`` loads it only when the command line names that
#: command, so every other command works without it.
SERVED_ELSEWHERE = {
    "sim": ServedElsewhere("sequence_ai_sim.cli", "run the gateway simulator on loopback"),
    "report": ServedElsewhere(
        "sequence_ai_core.recording.report_cli",
        "summarise and plot a recorded episode (a rosbag2 bag; the report extra)",
    ),
}


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that names the fix (not usage + error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _base_url(args: argparse.Namespace) -> str:
    """The gateway URL for a command, with the CLI's spelling of the insecure-http escape."""
    try:
        return resolve_base_url(args.base_url, allow_insecure_http=args.allow_insecure_http)
    except ValueError as exc:
        raise ValueError(
            str(exc).replace("pass allow_insecure_http=True", "add --allow-insecure-http")
        ) from None


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
    """The catalogue as a table. It prints what the gateway sent, so the key it was sent
    (a gateway may show private models) is redacted from the output."""
    base_url = _base_url(args)
    insecure = args.allow_insecure_http
    key = resolve_api_key(None)

    def listing(endpoint: str | None) -> list[Model]:
        return models(
            endpoint=endpoint, api_key=key, base_url=base_url, allow_insecure_http=insecure
        )

    entries = listing(args.endpoint)
    if not entries:
        everything = listing(None)
        served = sorted({m.endpoint for m in everything if m.endpoint})
        known = ", ".join(served) or "none"
        print(
            redact(
                f"sequence-ai models: no model serves endpoint {args.endpoint!r} at {base_url} "
                f"(endpoints served: {known})",
                key,
            ),
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(redact(_format_table(entries), key))
    return EXIT_OK


def _read_key() -> str | None:
    """The key typed at a hidden prompt, or the first line piped in; None if there is none."""
    try:
        if sys.stdin is None or not sys.stdin.isatty():  # piped: no prompt, no echo warning
            line = sys.stdin.readline() if sys.stdin is not None else ""
        else:
            line = getpass.getpass("Sequences API key (input hidden): ")
    except (EOFError, OSError):  # stdin closed, or not readable at all
        return None
    return line.strip() or None


def _cmd_login(args: argparse.Namespace) -> int:
    if args.logout:
        removed = delete_api_key()
        print(f"removed {credentials_path()}" if removed else "no saved key to remove")
        return EXIT_OK
    try:
        key = _read_key()
    except KeyboardInterrupt:
        print("\nsequence-ai login: interrupted; nothing saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    if key is None:
        print(
            "sequence-ai login: no key entered; nothing saved "
            "(type it at the prompt, or pipe it: `sequence-ai login < keyfile`)",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    path = save_api_key(key)
    print(f"saved to {path} (mode 0600)")
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.samples < 1:
        print("sequence-ai doctor: --samples must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    url = (args.base_url or os.environ.get("SEQUENCES_BASE_URL") or "").strip()
    if url.lower().startswith(("ws://", "wss://")):
        return _cmd_openpi_doctor(args, url)
    settings = DoctorSettings(
        base_url=_base_url(args),
        samples=args.samples,
        model=args.model,
        act=not args.no_act,
    )
    return EXIT_OK if run_doctor(settings) else EXIT_FAILURE


def _cmd_openpi_doctor(args: argparse.Namespace, url: str) -> int:
    if not args.profile:
        print("sequence-ai doctor: an openpi server needs --profile", file=sys.stderr)
        return EXIT_USAGE
    try:
        from ..openpi.doctor import OpenpiDoctorSettings, run_openpi_doctor
    except ImportError:
        print(
            "sequence-ai doctor: ws:// needs pip install 'sequence_ai_ros[openpi]'",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    settings = OpenpiDoctorSettings(url, args.profile, samples=args.samples, act=not args.no_act)
    return EXIT_OK if run_openpi_doctor(settings) else EXIT_FAILURE


def _gateway_flags() -> argparse.ArgumentParser:
    """``--base-url`` and ``--allow-insecure-http``, accepted before or after the command.

    After the command they default to SUPPRESS, so they do not overwrite a value given
    before it."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--base-url",
        default=argparse.SUPPRESS,
        help="gateway URL (default: $SEQUENCES_BASE_URL or the public gateway)",
    )
    flags.add_argument(
        "--allow-insecure-http",
        action="store_true",
        default=argparse.SUPPRESS,
        help="allow plain http:// to a non-loopback host (sends the key unencrypted)",
    )
    return flags


def _add_commands(parser: argparse.ArgumentParser, *, loading: Sequence[str]) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    gateway = [_gateway_flags()]
    listing = commands.add_parser("models", help="list the gateway's models", parents=gateway)
    listing.add_argument("--endpoint", default="act", help="only models serving this endpoint")
    listing.set_defaults(handler=_cmd_models)

    login = commands.add_parser("login", help="save an API key (0600) for this user")
    login.add_argument("--logout", action="store_true", help="delete the saved key")
    login.set_defaults(handler=_cmd_login)

    doctor = commands.add_parser(
        "doctor", help="check key, gateway, credit and latency", parents=gateway
    )
    doctor.add_argument("--model", help="model to test (default: the first act model)")
    doctor.add_argument(
        "--samples",
        type=int,
        default=3,
        help="act requests per latency measurement (each is a paid request; 2N+1 in all)",
    )
    doctor.add_argument(
        "--no-act", action="store_true", help="send no act request (no credit used)"
    )
    doctor.add_argument(
        "--profile", help="openpi observation profile (ws:// servers): droid, aloha, libero, a file"
    )
    doctor.set_defaults(handler=_cmd_doctor)

    for name, served in SERVED_ELSEWHERE.items():
        command = commands.add_parser(name, help=served.help)
        if name in loading:
            _load_served(served, command)


def _load_served(served: ServedElsewhere, command: argparse.ArgumentParser) -> None:
    """The command's arguments and handler, from the module that serves it."""
    module = importlib.import_module(served.module)
    add_arguments: Callable[[argparse.ArgumentParser], None] = module.add_arguments
    run: Callable[[argparse.Namespace], int] = module.run
    add_arguments(command)
    command.set_defaults(handler=run)


def build_parser(*, loading: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command line; ``loading``: the commands served elsewhere to load (their
    arguments, their handler), by name."""
    parser = OneLineErrorParser(
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
    _add_commands(parser, loading=loading)
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(loading=[name for name in SERVED_ELSEWHERE if name in arguments])
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
        print(f"\nsequence-ai {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
