"""The httpx the client needs, checked once at import, before anything uses it.

The socket guard (netguard) implements httpcore's network-backend interface, which httpcore
0.18 (httpx 0.25) has and 0.14 lacks: Ubuntu 22.04's python3-httpx 0.22.0 with
python3-httpcore 0.14.5, what ``rosdep install`` gives on Humble, failed deep inside an
import with ``AttributeError: module 'httpcore' has no attribute 'NetworkStream'``. Here it
fails with one line that says what to install. Ubuntu 24.04's python3-httpx 0.26.0 (Jazzy)
passes. Versions are read from the installed metadata, so nothing is imported to find out.
"""

from __future__ import annotations

import importlib.metadata
import re

#: The oldest versions the suite runs at (the Humble floor tier); setup.py declares the same.
MINIMUM = {"httpx": (0, 25), "httpcore": (0, 18)}
#: What gets them on Ubuntu 22.04, whose stock pip installs into ~/.local without PEP 668.
UPGRADE = "python3 -m pip install --user 'httpx>=0.25'"


def _version(distribution: str) -> tuple[str, tuple[int, ...]] | None:
    try:
        text = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    return text, tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def too_old() -> str | None:
    """Why the installed httpx cannot be used, in one line; ``None`` when it can."""
    found = {name: _version(name) for name in MINIMUM}
    old = [name for name, got in found.items() if got is not None and got[1] < MINIMUM[name]]
    if not old:
        return None
    have = ", ".join(f"{name} {got[0]}" for name, got in found.items() if got is not None)
    return (
        f"sequence_ai_core needs httpx >= 0.25 with httpcore >= 0.18, found {have} "
        f"(Ubuntu 22.04's python3-httpx is 0.22.0); install a newer one with: {UPGRADE}"
    )


def require_httpx() -> None:
    """Raise ImportError with :func:`too_old`'s line when httpx is too old to run on."""
    reason = too_old()
    if reason is not None:
        raise ImportError(reason)


require_httpx()  # sequence_ai_core imports this module first
