"""Camera images to what the gateway wants: a JPEG of the model's input size, aspect kept.

Every kB of request body adds latency on the real gateway (docs/performance.md, "Payload"),
so images are resized and encoded on the robot, not on the server.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import time

import numpy as np
import numpy.typing as npt
from PIL import Image

from .types import ImageFrame

# Pillow 9.0 (Ubuntu 22.04's python3-pil) predates the Image.Resampling enum.
_BILINEAR = getattr(Image, "Resampling", Image).BILINEAR
_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")
_BASE64 = re.compile(rb"[A-Za-z0-9+/]*={0,2}")


def _from_base64(text: bytes, where: str) -> bytes:
    compact = b"".join(text.split())  # base64.encodebytes wraps lines; the wrap is not data
    if compact.lower().startswith((b"http://", b"https://")):
        raise ValueError(f"{where} is a URL; the gateway never fetches URLs, send the image")
    if not _BASE64.fullmatch(compact):
        raise ValueError(f"{where} is text but not base64 of a JPEG or PNG image")
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where} is text but not valid base64") from None


def image_bytes(data: object, where: str = "image data") -> bytes:
    """The encoded image ``data`` holds: JPEG/PNG bytes as given, or decoded base64 text.

    Base64 text (a ``str``, or ASCII bytes) is what the 0.1.0 client's ``ImageFrame.data``
    held. The two are told apart by their first byte, not by guessing: JPEG starts with
    0xFF and PNG with 0x89, neither of which is a base64 character. Anything that is not,
    in the end, a JPEG or PNG is refused with ``ValueError`` naming ``where``.
    """
    if isinstance(data, str):
        try:
            raw = _from_base64(data.encode("ascii"), where)
        except UnicodeEncodeError:
            raise ValueError(f"{where} is text but not base64 (non-ASCII characters)") from None
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if not raw.startswith(_SIGNATURES) and _BASE64.fullmatch(b"".join(raw.split())):
            raw = _from_base64(raw, where)
    else:
        raise ValueError(
            f"{where} must be encoded image bytes or base64 text, not {type(data).__name__}"
        )
    if not raw:
        raise ValueError(f"{where} must be a non-empty encoded JPEG or PNG image")
    if not raw.startswith(_SIGNATURES):
        raise ValueError(
            f"{where} is not a JPEG or PNG image "
            "(encode arrays with sequence_ai_core.images.encode_image)"
        )
    return raw


def _array_to_rgb(image: npt.NDArray[np.generic]) -> Image.Image:
    # dtype to dtype: numpy 1.21's stubs call a dtype compared with a scalar type unreachable.
    if image.dtype != np.dtype(np.uint8):
        raise ValueError(f"image array must be uint8, got {image.dtype}")
    if image.size == 0:
        raise ValueError(f"image array is empty, shape {image.shape}")
    if image.ndim == 2:
        return Image.fromarray(np.ascontiguousarray(image)).convert("RGB")
    if image.ndim == 3 and image.shape[2] == 3:
        return Image.fromarray(np.ascontiguousarray(image))
    if image.ndim == 3 and image.shape[2] == 4:
        return Image.fromarray(np.ascontiguousarray(image)).convert("RGB")
    raise ValueError(f"image array must be HxW, HxWx3 or HxWx4, got shape {image.shape}")


def _decode(data: bytes) -> Image.Image:
    if not data.startswith(_SIGNATURES):
        raise ValueError("image bytes must be an encoded JPEG or PNG")
    try:
        # Named before the with: Pillow 13 types __enter__ as typing.Self, Any to mypy at
        # Python 3.10, which would leave the conversion unchecked.
        opened = Image.open(io.BytesIO(data))
        with opened:
            return opened.convert("RGB")
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"image bytes could not be decoded: {exc}") from exc


def fit_with_padding(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """Scale to fit inside ``size`` (width, height) keeping aspect; pad the rest with black."""
    width, height = size
    if width < 1 or height < 1:
        raise ValueError(f"size must be positive (width, height), got {size}")
    if image.size == (width, height):
        return image
    scale = min(width / image.width, height / image.height)
    scaled_w = max(1, round(image.width * scale))
    scaled_h = max(1, round(image.height * scale))
    scaled = image.resize((scaled_w, scaled_h), _BILINEAR)
    canvas = Image.new("RGB", (width, height), (0, 0, 0))
    canvas.paste(scaled, ((width - scaled_w) // 2, (height - scaled_h) // 2))
    return canvas


#: What a model's camera input is unless its catalogue entry or the caller says otherwise, and
#: the JPEG quality (the gateway's own encoder uses about 95; lower saves bytes, costs detail).
DEFAULT_SIZE = (224, 224)
DEFAULT_QUALITY = 95


def encode_image(
    image: npt.NDArray[np.generic] | bytes | str,
    *,
    view: str,
    size: tuple[int, int] | None = DEFAULT_SIZE,
    quality: int = DEFAULT_QUALITY,
    timestamp_ms: int | None = None,
) -> ImageFrame:
    """Encode one camera image for an observation.

    ``image`` is an HxWx3 uint8 RGB array (HxW grayscale and HxWx4 RGBA are converted) or
    already-encoded JPEG/PNG bytes (or their base64 text), which pass through untouched when
    ``size`` is None.
    ``size`` is (width, height). ``timestamp_ms`` defaults to now (wall clock).
    """
    if not view:
        raise ValueError("view must be a non-empty camera name")
    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be 1..100, got {quality}")
    if timestamp_ms is None:
        stamp = int(time.time() * 1000)
    elif isinstance(timestamp_ms, bool) or not (
        isinstance(timestamp_ms, (int, float)) and math.isfinite(timestamp_ms) and timestamp_ms >= 0
    ):
        raise ValueError(f"timestamp_ms must be a non-negative number of ms, got {timestamp_ms!r}")
    else:
        stamp = int(timestamp_ms)
    if isinstance(image, (bytes, bytearray, str)):
        data = image_bytes(image, "image")
        picture = _decode(data)
        if size is None:
            return ImageFrame(view=view, data=data, timestamp_ms=stamp)
    elif isinstance(image, np.ndarray):
        picture = _array_to_rgb(image)
    else:
        raise ValueError(
            f"image must be a numpy array or encoded bytes, not {type(image).__name__}"
        )
    if size is not None:
        picture = fit_with_padding(picture, size)
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=quality)
    return ImageFrame(view=view, data=out.getvalue(), timestamp_ms=stamp)
