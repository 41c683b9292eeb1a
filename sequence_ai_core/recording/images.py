"""Camera frames as recorded: their bytes as sent, or scaled down to a side (JPEG)."""

from __future__ import annotations

import base64
import io
import re

from ..types import ImageFrame

JPEG_QUALITY = 85


def frame_bytes(frame: ImageFrame, max_side: int | None) -> tuple[bytes, str]:
    """The frame's encoded bytes and their format (``jpeg`` or ``png``), scaled so that no
    side exceeds ``max_side`` (then always JPEG); None keeps them as sent."""
    data = frame.data if isinstance(frame.data, bytes) else base64.b64decode(frame.data)
    image_format = "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "jpeg"
    if max_side is None:
        return data, image_format
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if max(image.size) <= max_side:
            return data, image_format
        image.thumbnail((max_side, max_side))
        out = io.BytesIO()
        image.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue(), "jpeg"


def topic_part(view: str) -> str:
    """A camera view's name as a ROS topic name segment (letters, digits, underscores)."""
    part = re.sub(r"[^A-Za-z0-9_]", "_", view).strip("_")
    return part if part and not part[0].isdigit() else f"view_{part}"
