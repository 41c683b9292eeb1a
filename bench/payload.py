"""Payload and image pipeline: request bytes, encode time and the refill time they cost.

Upload size drives latency on the real gateway (~16 ms per kB measured), so the encoding of
two camera frames decides a large share of every refill. Three pipelines for two 640x480
cameras: lossless PNG at full size (what one gets by sending the camera frame as is), JPEG
at full size, and the library's default (resized with padding to 224x224, JPEG quality 95).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from bench._common import BENCH_KEY, counted, machine_note, ms, quantile, ratio
from bench._common import table as markdown_table
from sequence_ai_core.gateway.wire import encode_act_request
from sequence_ai_core.images import encode_image
from sequence_ai_core.policy import connect
from sequence_ai_core.types import ImageFrame, Observation, Proprioception
from sequence_ai_sim import CATALOGUE, GatewaySimulator

MODEL = CATALOGUE["pi05-droid"]
Frame = npt.NDArray[np.uint8]
#: Upload cost per kB of request body, measured on the real gateway.
MS_PER_KB = 16.0
WIDTH, HEIGHT = 640, 480
#: In quick mode, only pipelines whose modelled refill is below this are sent for real.
QUICK_MEASURE_LIMIT_S = 4.0
#: Std-dev of the sensor noise, in 8-bit levels (see camera_frame).
NOISE_LEVEL = 1.5


def camera_frame(seed: int) -> Frame:
    """A deterministic 640x480 RGB scene: lit table, objects, and camera sensor noise.

    Sensor noise matters: it is what makes real camera frames expensive to store losslessly,
    and a noise-free synthetic image would flatter PNG. Its level is set so that a 640x480
    JPEG comes out near the ~45 kB measured for real camera frames.
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    base = 90 + 60 * (y / HEIGHT) + 25 * np.sin(x / 97.0)
    image = np.repeat(base[:, :, None], 3, axis=2) * np.array([1.0, 0.95, 0.85])
    for _ in range(6):
        cx, cy, r = rng.uniform(60, WIDTH - 60), rng.uniform(60, HEIGHT - 60), rng.uniform(25, 80)
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r**2
        image[mask] = rng.uniform(30, 230, size=3) * (1 - 0.3 * ((y[mask] - cy) / r))[:, None]
    image += rng.normal(0.0, NOISE_LEVEL, size=image.shape)
    frame: Frame = np.clip(image, 0, 255).astype(np.uint8)
    return frame


def png_frame(image: Frame, view: str, stamp: int) -> ImageFrame:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return ImageFrame(view=view, data=buffer.getvalue(), timestamp_ms=stamp)


def jpeg_full_frame(image: Frame, view: str, stamp: int) -> ImageFrame:
    return encode_image(image, view=view, size=None, timestamp_ms=stamp)


def jpeg_224_frame(image: Frame, view: str, stamp: int) -> ImageFrame:
    return encode_image(image, view=view, size=(224, 224), timestamp_ms=stamp)


Pipeline = Callable[[Frame, str, int], ImageFrame]
PIPELINES: list[tuple[str, Pipeline]] = [
    ("640x480 PNG (raw frame)", png_frame),
    ("640x480 JPEG q95", jpeg_full_frame),
    ("224x224 JPEG q95, padded (default)", jpeg_224_frame),
]


def observation(frames: list[ImageFrame]) -> Observation:
    joints = [0.0] * MODEL.joint_count
    return Observation(Proprioception(joints, gripper=0.5), frames, "put the cup in the sink")


def encode_pipeline(pipeline: Pipeline, images: list[Frame], repeats: int) -> dict[str, Any]:
    """Encode both cameras `repeats` times; time the images and the JSON body separately."""
    image_times, body_times = [], []
    obs = observation([])
    for _ in range(repeats):
        stamp = int(time.time() * 1000)
        start = time.perf_counter()
        frames = [
            pipeline(img, view, stamp) for img, view in zip(images, MODEL.camera_views, strict=True)
        ]
        encoded = time.perf_counter()
        obs = observation(frames)
        body = json.dumps(encode_act_request(MODEL.id, obs, {})).encode()
        image_times.append(encoded - start)
        body_times.append(time.perf_counter() - encoded)
    return {
        "obs": obs,
        "image_bytes": sum(len(frame.data) for frame in obs.images),
        "request_bytes": len(body),
        "image_s": quantile(image_times, 0.5),
        "body_s": quantile(body_times, 0.5),
    }


def measured_refill(sim: GatewaySimulator, obs: Observation, calls: int) -> float:
    """Median client-side latency of `calls` predictions on one kept-alive connection."""
    # The simulator has no connection delay here, so the first call needs no warm-up.
    with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=sim.url) as policy:
        return quantile([policy.predict(obs).latency_s for _ in range(calls)], 0.5)


def run(full: bool) -> str:
    images = [camera_frame(seed) for seed in range(len(MODEL.camera_views))]
    # quick: the simulator charges the modelled upload (2 s per call of the full-size JPEG),
    # which varies little between calls: one call of each
    repeats, calls = (20, 5) if full else (3, 1)
    results = [(name, encode_pipeline(p, images, repeats)) for name, p in PIPELINES]
    with GatewaySimulator(api_key=BENCH_KEY, ms_per_kb=MS_PER_KB) as sim:
        for _, result in results:
            result["model_s"] = MS_PER_KB * result["request_bytes"] / 1024 / 1000
            cheap = result["model_s"] < QUICK_MEASURE_LIMIT_S
            if full or cheap:
                result["refill_s"] = measured_refill(sim, result["obs"], calls if cheap else 1)
            else:
                result["refill_s"] = None
    raw = results[0][1]
    sizes = f"{counted(repeats, 'encode')} per pipeline, {counted(calls, 'refill')} where sent"
    rows = []
    for name, r in results:
        refill = r["refill_s"]
        rows.append(
            [
                name,
                f"{r['image_bytes'] / 1000:.1f}",
                f"{r['request_bytes'] / 1000:.1f}",
                ratio(r["request_bytes"], raw["request_bytes"]),
                ms(r["image_s"]),
                ms(r["body_s"]),
                ms(r["model_s"], 0),
                "not sent (quick)" if refill is None else ms(refill, 0),
                ratio(r["model_s"], raw["model_s"]),
                f"{r['model_s'] / MODEL.covers_seconds:.0%}",
            ]
        )
    headers = [
        "pipeline (2 cameras)",
        "image kB",
        "request kB",
        "request vs PNG",
        "encode ms (p50)",
        "JSON+base64 ms",
        f"upload ms at {MS_PER_KB:g} ms/kB",
        "measured refill ms (sim)",
        "refill vs PNG",
        f"of a {MODEL.covers_seconds:.2f} s chunk",
    ]
    return "\n\n".join(
        [
            "## Payload and image pipeline",
            machine_note(full=full, sizes=sizes),
            f"Two synthetic {WIDTH}x{HEIGHT} camera frames with sensor noise, {MODEL.short_id}. "
            f"The simulator charges {MS_PER_KB:g} ms per kB of request body (the real gateway's "
            "measured cost) and no model latency, so the refill column is the upload alone. "
            "Ratios are against sending the raw PNG frames.",
            markdown_table(headers, rows),
        ]
    )
