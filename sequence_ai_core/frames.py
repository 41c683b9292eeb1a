"""Camera frames encoded where the request is built, not where they are observed.

``observe`` runs on the caller's thread (the robot's inputs belong to the control loop), and
in ``run()`` and the engine the request body is built on a worker thread. Encoding two
640x480 frames to JPEG takes a large share of a 50 Hz period if ``observe`` does it
(docs/performance.md, "The control thread").
A ``RawFrame`` holds the pixels and encodes them (resize with padding, JPEG, as
``images.encode_image``) the first time its ``data`` is read, which the wire layer does while
building the body: on the worker for ``run()`` and the engine, on the caller for
``predict()``. So ``observe`` still runs on the caller's thread and reads the sensors there;
only the heavy work moves.

The pixels are copied when the frame is made (``copy=True``), so a camera driver may reuse
its buffer; pass ``copy=False`` for arrays nobody writes to again (e.g. one made from a ROS
message).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import numpy.typing as npt

from .images import DEFAULT_QUALITY, DEFAULT_SIZE, encode_image, image_bytes
from .types import ImageFrame


class RawFrame(ImageFrame):
    """An ``ImageFrame`` whose ``data`` is encoded from ``pixels`` on first use.

    ``pixels`` is an HxWx3 uint8 RGB array (HxW and HxWx4 are converted); ``size`` is the
    (width, height) to fit it into, None to keep it; a bad array raises ``ValueError`` when
    the request is built (``run()`` then ends with ``InvalidRequest``, nothing sent).
    """

    _pixels: npt.NDArray[np.generic]
    _size: tuple[int, int] | None
    _quality: int
    _encoded: bytes | None
    _lock: threading.Lock

    def __init__(
        self,
        view: str,
        pixels: npt.NDArray[np.generic],
        *,
        size: tuple[int, int] | None = DEFAULT_SIZE,
        quality: int = DEFAULT_QUALITY,
        timestamp_ms: int | None = None,
        copy: bool = True,
    ) -> None:
        stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        object.__setattr__(self, "view", view)
        object.__setattr__(self, "timestamp_ms", stamp)
        object.__setattr__(self, "_pixels", np.array(pixels) if copy else pixels)
        object.__setattr__(self, "_size", size)
        object.__setattr__(self, "_quality", quality)
        object.__setattr__(self, "_encoded", None)
        object.__setattr__(self, "_lock", threading.Lock())

    @property
    def data(self) -> bytes:
        """The encoded JPEG, made on first read (once, whichever thread reads it)."""
        with self._lock:
            encoded = self._encoded
            if encoded is None:
                frame = encode_image(
                    self._pixels,
                    view=self.view,
                    size=self._size,
                    quality=self._quality,
                    timestamp_ms=self.timestamp_ms,
                )
                encoded = image_bytes(frame.data)
                object.__setattr__(self, "_encoded", encoded)
            return encoded

    @property
    def pixels(self) -> npt.NDArray[np.generic]:
        """The frame as given (not resized or encoded): what an openpi profile sends."""
        return self._pixels

    @property
    def encoded(self) -> bool:
        """Whether ``data`` was made yet."""
        return self._encoded is not None

    def __repr__(self) -> str:
        shape = "x".join(str(n) for n in self._pixels.shape)
        return f"RawFrame(view={self.view!r}, {shape} pixels, timestamp_ms={self.timestamp_ms})"
