"""Where the API key comes from: argument, environment, or a 0600 file under XDG_CONFIG_HOME."""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from .errors import ConfigurationError

ENV_KEY = "SEQUENCES_API_KEY"

log = logging.getLogger(__name__)


def credentials_path() -> Path:
    """``$XDG_CONFIG_HOME/sequence-ai/credentials`` (XDG default: ``~/.config``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "sequence-ai" / "credentials"


def _checked(key: str | None) -> str | None:
    """Strip a key; empty means absent. A key with whitespace or control characters inside
    would corrupt the Authorization header, so it is refused without echoing it."""
    if key is None:
        return None
    key = key.strip()
    if not key:
        return None
    # HTTP headers are ASCII: httpx would raise UnicodeEncodeError with the key in its args.
    if not key.isascii() or any(ch.isspace() or not ch.isprintable() for ch in key):
        raise ConfigurationError("API key contains whitespace, control or non-ASCII characters")
    return key


#: ``_checked`` for a key given to another backend (an openpi server's ``Api-Key`` header).
checked_api_key = _checked


def _read_file(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "ignoring %s: it is readable by group or others (mode %o); "
            "run `chmod 600 %s` or `sequence-ai login` again",
            path,
            stat.S_IMODE(mode),
            path,
        )
        return None
    text = _read_text(path)
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return _checked(line)
    return None


def _read_text(path: Path) -> str:
    """The file as UTF-8 text. Its failures are raised outside the ``except`` block: a
    ``UnicodeDecodeError`` carries the whole file (the key included) and must not ride
    along as the new error's context."""
    problem = None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"is not UTF-8 text (byte {exc.start})"
    except OSError as exc:
        problem = f"cannot be read ({type(exc).__name__}: {exc.strerror or 'error'})"
    raise ConfigurationError(
        f"credentials file {path} {problem}; run `sequence-ai login` again or set ${ENV_KEY}"
    )


def resolve_api_key_with_source(explicit: str | None = None) -> tuple[str | None, str]:
    """(key, where it came from). The source names a place, never the key."""
    key = _checked(explicit)
    if key:
        return key, "api_key argument"
    key = _checked(os.environ.get(ENV_KEY))
    if key:
        return key, f"${ENV_KEY}"
    path = credentials_path()
    key = _read_file(path)
    if key:
        return key, str(path)
    return None, "none"


def missing_key_message() -> str:
    """Why there is no key, naming every place that was searched (never a key)."""
    return (
        f"no API key: looked for the api_key= argument, ${ENV_KEY} and {credentials_path()}; "
        f"set ${ENV_KEY} or run `sequence-ai login`"
    )


def resolve_api_key(explicit: str | None = None) -> str | None:
    """Argument, else ``$SEQUENCES_API_KEY``, else the credentials file, else None."""
    return resolve_api_key_with_source(explicit)[0]


def save_api_key(key: str) -> Path:
    """Write the key atomically to the credentials file, mode 0600 in a 0700 directory.

    The temporary file is created 0600 and renamed over the target, so the key is never
    readable by anyone else, not even for an instant, and a crash leaves the old file intact.
    """
    checked = _checked(key)
    if not checked:
        raise ValueError("API key is empty")
    path = credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp_name = path.parent / f".credentials-{secrets.token_hex(6)}"
    fd = os.open(tmp_name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (checked + "\n").encode("utf-8"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp_name)
        raise
    os.close(fd)
    os.replace(tmp_name, path)
    return path


def delete_api_key() -> bool:
    """Remove the credentials file; True if there was one."""
    try:
        credentials_path().unlink()
    except FileNotFoundError:
        return False
    return True
