"""The optional dependencies of the recorder and the report, and the one error for a missing
one: it names the extra that installs it."""

from __future__ import annotations


class MissingExtra(ImportError):
    """``what`` needs ``module``, which the ``extra`` extra installs."""

    def __init__(self, what: str, module: str, extra: str) -> None:
        super().__init__(f"{what} needs {module}: pip install 'sequence-ai-ros[{extra}]'")
        self.module = module
        self.extra = extra
