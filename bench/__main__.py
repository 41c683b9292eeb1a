"""``python -m bench [--full] [names...]``: run benchmarks, print and save their tables.

Every module in this package whose name does not start with an underscore and that defines
``run(full: bool) -> str`` is a benchmark. Quick mode by default, its tables and figures in
``bench/results/quick/`` (not committed); ``--full`` runs longer and writes ``bench/results/``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench._common import results_dir

HERE = Path(__file__).resolve().parent

Benchmark = Callable[[bool], str]


def discover() -> dict[str, Benchmark]:
    """Benchmark name -> its ``run`` function, sorted by name."""
    found: dict[str, Benchmark] = {}
    for info in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"bench.{info.name}")
        run = getattr(module, "run", None)
        if callable(run):
            found[info.name] = run
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--full", action="store_true", help="longer runs, tighter numbers")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    args = parser.parse_args(argv)
    benchmarks = discover()
    if args.list:
        print("\n".join(benchmarks))
        return 0
    unknown = [name for name in args.names if name not in benchmarks]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(benchmarks)}")
    results = results_dir(args.full)
    shown = results.relative_to(HERE.parent)
    for name in args.names or list(benchmarks):
        started = time.monotonic()
        print(f"## {name}\n", flush=True)
        markdown = benchmarks[name](args.full)
        (results / f"{name}.md").write_text(markdown.rstrip() + "\n", encoding="utf-8")
        print(markdown.rstrip(), flush=True)
        print(f"\n_({name}: {time.monotonic() - started:.0f} s, saved to {shown}/{name}.md)_\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
