"""Benchmarks: side-by-side tables, not tests. Run ``python -m bench [--full] [names...]``.

Each module ``bench/<name>.py`` with a ``run(full: bool) -> str`` function is one benchmark;
it returns markdown, which is printed and written to ``bench/results/<name>.md`` (``--full``)
or ``bench/results/quick/<name>.md`` (quick, git-ignored).
"""
