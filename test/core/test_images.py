"""encode_image: sizes, aspect-keeping padding, accepted inputs, valid JPEG output."""

from __future__ import annotations

import io
import time

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from sequence_ai_core.images import encode_image


def decode(data: bytes) -> npt.NDArray[np.uint8]:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG"
        return np.asarray(image.convert("RGB"))


def white(height: int, width: int) -> npt.NDArray[np.uint8]:
    return np.full((height, width, 3), 255, dtype=np.uint8)


def test_default_size_is_224_square_jpeg() -> None:
    frame = encode_image(white(480, 640), view="exterior_1", timestamp_ms=123)
    assert frame.view == "exterior_1"
    assert frame.timestamp_ms == 123
    assert frame.data.startswith(b"\xff\xd8\xff")
    assert decode(frame.data).shape == (224, 224, 3)


def test_wide_image_is_padded_top_and_bottom() -> None:
    # 640x480 into 224x224: scaled to 224x168, 28 black rows above and below.
    pixels = decode(encode_image(white(480, 640), view="v").data).astype(int)
    assert pixels[:20].max() < 30
    assert pixels[-20:].max() < 30
    assert pixels[40:184].min() > 225
    assert pixels[112].min() > 225  # full width in the middle row


def test_tall_image_is_padded_left_and_right() -> None:
    pixels = decode(encode_image(white(200, 100), view="v", size=(200, 100)).data).astype(int)
    assert pixels.shape == (100, 200, 3)
    assert pixels[:, :60].max() < 30
    assert pixels[:, -60:].max() < 30
    assert pixels[:, 80:120].min() > 225


def test_size_is_width_then_height() -> None:
    assert decode(encode_image(white(96, 128), view="v", size=(160, 90)).data).shape == (
        90,
        160,
        3,
    )


def test_grayscale_and_rgba_are_converted() -> None:
    gray = np.full((32, 32), 200, dtype=np.uint8)
    assert decode(encode_image(gray, view="v", size=(32, 32)).data).shape == (32, 32, 3)
    rgba = np.zeros((32, 32, 4), dtype=np.uint8)
    rgba[..., 0] = 250
    red = decode(encode_image(rgba, view="v", size=(32, 32)).data).astype(int)
    assert red[..., 0].min() > 230 and red[..., 1].max() < 30


def test_colours_survive_at_quality_95() -> None:
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    image[..., 2] = 200
    pixels = decode(encode_image(image, view="v", size=None).data).astype(int)
    assert abs(int(np.median(pixels[..., 2])) - 200) <= 3


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((8, 8, 3), dtype=np.float32),
        np.zeros((8, 8, 2), dtype=np.uint8),
        np.zeros((8,), dtype=np.uint8),
        np.zeros((2, 8, 8, 3), dtype=np.uint8),
        b"not an image",
        b"\xff\xd8\xff truncated jpeg",
    ],
)
def test_bad_inputs_are_refused(bad: npt.NDArray[np.generic] | bytes) -> None:
    with pytest.raises(ValueError):
        encode_image(bad, view="v")


def test_encoded_bytes_pass_through_when_size_is_none() -> None:
    original = encode_image(white(48, 64), view="v", size=None).data
    assert encode_image(original, view="v", size=None).data == original


def test_png_bytes_are_resized_to_jpeg() -> None:
    buffer = io.BytesIO()
    Image.fromarray(white(30, 60)).save(buffer, format="PNG")
    frame = encode_image(buffer.getvalue(), view="v", size=(64, 64))
    assert decode(frame.data).shape == (64, 64, 3)


def test_timestamp_defaults_to_now_and_arguments_are_checked() -> None:
    before = int(time.time() * 1000)
    frame = encode_image(white(8, 8), view="v", size=(8, 8))
    assert frame.timestamp_ms is not None and before <= frame.timestamp_ms <= before + 60_000
    with pytest.raises(ValueError, match="view"):
        encode_image(white(8, 8), view="")
    with pytest.raises(ValueError, match="quality"):
        encode_image(white(8, 8), view="v", quality=0)
    with pytest.raises(ValueError, match="size"):
        encode_image(white(8, 8), view="v", size=(0, 8))


def test_typical_payload_is_small() -> None:
    # ~16 ms per kB on the real gateway: a 224x224 frame should stay in the ~10 kB range.
    rng = np.random.default_rng(0)
    scene = np.kron(rng.integers(0, 255, (12, 16, 3)), np.ones((40, 40, 1))).astype(np.uint8)
    assert len(encode_image(scene, view="v").data) < 30_000
