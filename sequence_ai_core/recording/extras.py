"""The optional dependencies of the recorder and the report, and the one error for a missing
one: it names the extra that installs it."""

from __future__ import annotations


def needs(what: str, module: str, extra: str) -> str:
    """The one line that says so: ``what`` needs ``module``, and the command that installs
    it."""
    return f"{what} needs {module}: pip install 'sequence_ai_ros[{extra}]'"


class MissingExtra(ImportError):
    """``what`` needs ``module``, which the ``extra`` extra installs."""

    def __init__(self, what: str, module: str, extra: str) -> None:
        super().__init__(needs(what, module, extra))
        self.module = module
        self.extra = extra
