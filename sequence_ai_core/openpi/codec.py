"""msgpack with numpy arrays, as openpi's servers speak it (openpi-client's ``msgpack_numpy``).

On the wire an array is a msgpack map with binary keys: ``__ndarray__`` (true), ``data``
(the raw bytes, C order), ``dtype`` (numpy's ``dtype.str``, e.g. ``"<f4"``) and ``shape``
(a list of ints); a numpy scalar is ``__npgeneric__`` / ``data`` (a plain value) / ``dtype``.
Everything else is plain msgpack, strings as ``str``.

Decoding is of untrusted input: only numeric and boolean dtypes are rebuilt (openpi refuses
object, void and complex arrays on its side as well), the byte count must match the shape
exactly, and every array is copied out of the frame so nothing aliases the receive buffer.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

#: dtype kinds that are rebuilt: bool, signed and unsigned ints, floats.
_DECODABLE_KINDS = frozenset("biuf")
#: Dimensions of one array; an action chunk has 2, an image 3.
MAX_NDIM = 8


class CodecError(ValueError):
    """A frame that is not msgpack-numpy as openpi writes it."""


def _pack_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _DECODABLE_KINDS:
            raise CodecError(f"arrays of dtype {value.dtype} are not sent")
        array = np.ascontiguousarray(value)
        return {
            b"__ndarray__": True,
            b"data": array.tobytes(),
            b"dtype": array.dtype.str,
            b"shape": list(array.shape),
        }
    if isinstance(value, np.generic):
        if value.dtype.kind not in _DECODABLE_KINDS:
            raise CodecError(f"scalars of dtype {value.dtype} are not sent")
        return {b"__npgeneric__": True, b"data": value.item(), b"dtype": value.dtype.str}
    raise CodecError(f"cannot encode {type(value).__name__}")


def packb(value: Any) -> bytes:
    """One frame: ``value`` (dicts, lists, str, numbers, numpy arrays and scalars)."""
    try:
        packed = msgpack.packb(value, default=_pack_default, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(f"cannot encode the observation: {exc}") from None
    if not isinstance(packed, bytes):
        raise CodecError("msgpack returned no bytes")
    return packed


def _dtype(raw: Any) -> np.dtype[Any]:
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    if not isinstance(text, str) or len(text) > 8:
        raise CodecError(f"array dtype must be a short string, got {raw!r}")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        raise CodecError(f"unknown array dtype {text!r}") from None
    if dtype.kind not in _DECODABLE_KINDS:
        raise CodecError(f"array dtype {text!r} is not numeric")
    return dtype


def _array(obj: dict[Any, Any]) -> np.ndarray[Any, Any]:
    data, shape = obj.get(b"data"), obj.get(b"shape")
    dtype = _dtype(obj.get(b"dtype"))
    if not isinstance(data, bytes):
        raise CodecError("array data must be bytes")
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_NDIM:
        raise CodecError(f"array shape must be a list of at most {MAX_NDIM} ints")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise CodecError(f"array shape must hold non-negative ints, got {shape!r}")
    count = math.prod(shape)
    if count * dtype.itemsize != len(data):
        raise CodecError(
            f"array of shape {tuple(shape)} and dtype {dtype.str} needs "
            f"{count * dtype.itemsize} bytes, the frame has {len(data)}"
        )
    # Its dtype is the frame's, known only at run time; the annotation also keeps numpy 2.4's
    # .copy() (typed as typing.Self, Any to mypy at Python 3.10) from making the return Any.
    array: np.ndarray[Any, Any] = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    return array


def _scalar(obj: dict[Any, Any]) -> Any:
    dtype = _dtype(obj.get(b"dtype"))
    value = obj.get(b"data")
    boolean = dtype.kind == "b" and isinstance(value, bool)
    if not boolean and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise CodecError(f"scalar data must be a number, got {type(value).__name__}")
    try:
        return dtype.type(value)
    except (OverflowError, ValueError, TypeError):
        raise CodecError(f"scalar {value!r} does not fit {dtype.str}") from None


def _object_hook(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        return _array(obj)
    if b"__npgeneric__" in obj:
        return _scalar(obj)
    return obj


def unpackb(frame: bytes) -> Any:
    """Decode one frame; ``CodecError`` for anything that is not msgpack-numpy."""
    try:
        return msgpack.unpackb(
            frame,
            object_hook=_object_hook,
            raw=False,
            strict_map_key=False,
        )
    except CodecError:
        raise
    except (
        ValueError,
        TypeError,
        KeyError,
        OverflowError,
        RecursionError,
        msgpack.ExtraData,
    ) as exc:
        raise CodecError(f"not a msgpack frame: {type(exc).__name__}") from None
    except msgpack.UnpackException as exc:
        raise CodecError(f"not a msgpack frame: {type(exc).__name__}") from None
