"""Raw requests to the gateway simulator, as a client of the wire contract would send them,
and the simulator started as a command (``python -m sequence_ai_sim``)."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from sequence_ai_core.types import MODEL_PREFIX
from sequence_ai_sim import GatewaySimulator
from support import TEST_KEY

PI05 = MODEL_PREFIX + "pi05-droid"
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}
REPO = Path(__file__).resolve().parents[2]


def jpeg_b64() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (10, 120, 200)).save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode()


def act_request(model: str = PI05, **options: Any) -> dict[str, Any]:
    observation = {
        "images": [{"view": "exterior_1", "data": jpeg_b64(), "timestamp_ms": 1_764_480_000_000}],
        "proprioception": {"joint_positions": [0.0] * 7, "gripper": 0.5},
        "instruction": "put the cup in the sink",
    }
    return {"model": model, "observation": observation, **options}


def client(sim: GatewaySimulator, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url=sim.url, headers=AUTH, timeout=10.0, **kwargs)


def start_sim_cli(*extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m sequence_ai_sim --port 0 *extra``, its output piped as text."""
    command = [sys.executable, "-m", "sequence_ai_sim", "--port", "0", *extra]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
