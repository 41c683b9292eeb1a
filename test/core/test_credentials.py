"""Key resolution order and the 0600 credentials file."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from sequence_ai_core import connect
from sequence_ai_core.credentials import (
    credentials_path,
    delete_api_key,
    resolve_api_key,
    resolve_api_key_with_source,
    save_api_key,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_path_follows_xdg_config_home(clean_env: Path) -> None:
    assert credentials_path() == clean_env / "sequence-ai" / "credentials"


def test_path_defaults_to_home_config(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert credentials_path() == tmp_path / "home" / ".config" / "sequence-ai" / "credentials"


def test_resolution_order(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_api_key_with_source() == (None, "none")
    path = save_api_key("from-file")
    assert resolve_api_key_with_source() == ("from-file", str(path))
    monkeypatch.setenv("SEQUENCES_API_KEY", "from-env")
    assert resolve_api_key_with_source() == ("from-env", "$SEQUENCES_API_KEY")
    assert resolve_api_key("explicit") == "explicit"
    assert resolve_api_key_with_source("explicit")[1] == "api_key argument"
    monkeypatch.setenv("SEQUENCES_API_KEY", "  ")
    assert resolve_api_key("") == "from-file"  # blank values count as absent


def test_saved_file_is_0600_in_0700_dir_even_with_permissive_umask(clean_env: Path) -> None:
    old = os.umask(0)
    try:
        path = save_api_key("  sk-secret  ")
    finally:
        os.umask(old)
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert path.read_text() == "sk-secret\n"
    assert [p.name for p in path.parent.iterdir()] == ["credentials"]  # no temp file left


def test_save_replaces_and_tightens_an_existing_directory(clean_env: Path) -> None:
    folder = clean_env / "sequence-ai"
    folder.mkdir(parents=True, mode=0o755)
    os.chmod(folder, 0o755)
    save_api_key("first")
    path = save_api_key("second")
    assert resolve_api_key() == "second"
    assert mode(folder) == 0o700
    assert mode(path) == 0o600


@pytest.mark.parametrize("bad_mode", [0o640, 0o604, 0o644])
def test_file_readable_by_others_is_ignored_with_warning(
    clean_env: Path, caplog: pytest.LogCaptureFixture, bad_mode: int
) -> None:
    path = save_api_key("sk-shared")
    os.chmod(path, bad_mode)
    with caplog.at_level(logging.WARNING, logger="sequence_ai_core.credentials"):
        assert resolve_api_key() is None
    assert str(path) in caplog.text
    assert "sk-shared" not in caplog.text


def test_comments_and_blank_lines_are_skipped(clean_env: Path) -> None:
    path = save_api_key("placeholder")
    path.write_text("# saved by sequence-ai\n\n  sk-real  \n")
    assert resolve_api_key() == "sk-real"


def test_keys_with_whitespace_inside_are_refused_without_echo(clean_env: Path) -> None:
    with pytest.raises(ValueError) as info:
        resolve_api_key("sk-abc\r\nX-Evil: 1")
    assert "sk-abc" not in str(info.value)
    with pytest.raises(ValueError):
        save_api_key("two words")
    with pytest.raises(ValueError):
        save_api_key("   ")


def test_non_ascii_keys_are_refused_before_reaching_the_http_layer(clean_env: Path) -> None:
    # httpx would raise UnicodeEncodeError carrying "Bearer <key>" in its args.
    with pytest.raises(ValueError, match="non-ASCII") as info:
        connect("pi05-droid", api_key="sk-\u00e9t\u00e9", base_url="http://127.0.0.1:9")
    assert "sk-" not in str(info.value)


def test_delete(clean_env: Path) -> None:
    assert delete_api_key() is False
    path = save_api_key("sk-gone")
    assert delete_api_key() is True
    assert not path.exists()
    assert resolve_api_key() is None
