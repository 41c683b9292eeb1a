"""A throwaway TLS certificate for a simulator on loopback (tests, benchmarks, bench testing).

Made with the ``openssl`` command rather than a Python package, so the simulator keeps no
dependency beyond the client's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed_cert(directory: Path, *, common_name: str = "127.0.0.1") -> tuple[str, str]:
    """(cert path, key path) of a one-day certificate for 127.0.0.1 and localhost."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={common_name}",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return str(cert), str(key)
