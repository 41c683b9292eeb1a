"""``sequence-ai report BAG``: a recorded episode's summary on stdout and its figure as a PNG.

The ``sequence-ai`` command loads this module by name for ``report`` (``SERVED_ELSEWHERE`` in
``sequence_ai_core.tools.cli``), so that the command works without the ``report`` extra until
this command runs: rosbags and matplotlib are imported here only when a bag is read or drawn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .extras import MissingExtra

EXIT_OK, EXIT_FAILURE = 0, 1
#: The figure's name when ``-o`` is not given: inside a bag directory, or beside a .mcap file.
DEFAULT_NAME = "report.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", type=Path, help="the bag: its directory or its .mcap file")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help=f"the PNG to write (default: {DEFAULT_NAME} in the bag directory, or "
        "<name>.report.png beside a .mcap file)",
    )
    parser.add_argument("--no-plot", action="store_true", help="print the summary only")


def default_output(bag: Path) -> Path:
    return bag / DEFAULT_NAME if bag.is_dir() else bag.with_suffix(".report.png")


def run(args: argparse.Namespace) -> int:
    """Print the summary, write the figure. A bag that cannot be read is a ``ValueError``,
    which the command reports in one line."""
    try:
        return _report(args.bag, args.output, draw=not args.no_plot)
    except MissingExtra as exc:
        print(f"sequence-ai report: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _report(bag: Path, output: Path | None, *, draw: bool) -> int:
    from .episode_log import read_episode
    from .measures import measure
    from .replay import attribute
    from .summary import summary

    episode = read_episode(bag)
    played = attribute(episode)
    found = measure(episode, played)
    print(summary(episode, found))
    if not draw:
        return EXIT_OK
    from .plot import plot

    target = output or default_output(bag)
    try:
        plot(episode, target, played, found)
    except OSError as exc:
        print(f"sequence-ai report: cannot write the figure {target}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"figure: {target}")
    return EXIT_OK
