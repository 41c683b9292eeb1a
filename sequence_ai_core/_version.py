"""Single source of the package version (read by setup.py and the User-Agent header)."""

__version__ = "0.1.0"
