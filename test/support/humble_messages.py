"""ROS message classes generated from Humble's real definitions (rosbags' ROS2_HUMBLE store).

They behave like rosidl_generator_py's Humble classes where it matters for catching bugs:
keyword constructor with zero defaults, ``__slots__`` (an unknown attribute raises), constants
as class attributes (``byte`` constants are ``bytes``), and setters that assert element types
the way the generated ones do (a numpy array is not accepted for a float64[] field; ints are
not accepted for float64 fields). Numeric sequences are stored as ``array.array``.
"""

from __future__ import annotations

import array
import types
from collections.abc import Sequence, Set
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1), "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1), "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1), "char": (0, 255),
}  # fmt: skip
_ARRAY_CODES = {
    "float64": "d", "float32": "f", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
    "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
}  # fmt: skip

# std_srvs/srv/Trigger.srv in Humble: empty request, then `bool success` and `string message`;
# SetBool.srv: `bool data`, then the same answer.
_SERVICES = {
    "std_srvs/srv/Trigger": ("", "bool success\nstring message\n"),
    "std_srvs/srv/SetBool": ("bool data\n", "bool success\nstring message\n"),
}


def _check_base(kind: str, value: Any, field: str) -> Any:
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "byte":
        ok = isinstance(value, bytes) and len(value) == 1
    elif kind in ("float32", "float64"):
        ok = isinstance(value, float)
    elif kind == "string":
        ok = isinstance(value, str)
    else:
        low, high = _INT_RANGES[kind]
        ok = isinstance(value, int) and low <= value <= high
    if not ok:
        raise AssertionError(f"The '{field}' field must be of type '{kind}', got {value!r}")
    return value


def _default_base(kind: str) -> Any:
    return {"bool": False, "byte": b"\x00", "float32": 0.0, "float64": 0.0, "string": ""}.get(
        kind, 0
    )


class _Message:
    __slots__: tuple[str, ...] = ()
    _fields: tuple[tuple[str, Any], ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - {name for name, _ in self._fields}
        if unknown:
            raise AssertionError(f"Invalid arguments passed to constructor: {sorted(unknown)}")
        for name, spec in self._fields:
            setattr(self, name, kwargs[name] if name in kwargs else _default(spec))

    def __setattr__(self, name: str, value: Any) -> None:
        spec = dict(self._fields).get(name)
        if spec is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        object.__setattr__(self, name, _coerce(spec, value, name))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return all(getattr(self, n) == getattr(other, n) for n, _ in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._fields)
        return f"{type(self).__name__}({inner})"


_CLASSES: dict[str, type[_Message]] = {}


def _default(spec: Any) -> Any:
    node, detail = spec
    if node == Nodetype.BASE:
        return _default_base(detail[0])
    if node == Nodetype.NAME:
        return _CLASSES[detail]()
    inner, size = detail
    if node == Nodetype.ARRAY:
        return [_default(inner)] * size
    return []


def _coerce(spec: Any, value: Any, field: str) -> Any:
    node, detail = spec
    if node == Nodetype.BASE:
        return _check_base(detail[0], value, field)
    if node == Nodetype.NAME:
        if not isinstance(value, _CLASSES[detail]):
            raise AssertionError(f"The '{field}' field must be a sub message of type '{detail}'")
        return value
    inner, size = detail
    is_sequence = isinstance(value, (Sequence, Set, array.array)) and not isinstance(value, str)
    if not is_sequence:
        raise AssertionError(f"The '{field}' field must be a sequence, got {type(value).__name__}")
    items = (
        [_coerce(inner, v, field) for v in value] if not isinstance(value, bytes) else list(value)
    )
    if node == Nodetype.ARRAY and len(items) != size:
        raise AssertionError(f"The '{field}' field must have {size} elements")
    if node == Nodetype.SEQUENCE and size and len(items) > size:
        raise AssertionError(f"The '{field}' field is bounded to {size} elements")
    code = _ARRAY_CODES.get(inner[1][0]) if inner[0] == Nodetype.BASE else None
    return array.array(code, items) if code else items


def _make_class(name: str, consts: Any, fields: Any) -> type[_Message]:
    attrs: dict[str, Any] = {
        "__slots__": tuple(f for f, _ in fields),
        "_fields": tuple(fields),
        "__module__": name.rsplit("/", 1)[0].replace("/", "."),
    }
    for const, kind, value in consts:
        attrs[const] = bytes([value]) if kind == "byte" else value
    return type(name.rsplit("/", 1)[1], (_Message,), attrs)


def _definitions() -> dict[str, Any]:
    store = get_typestore(Stores.ROS2_HUMBLE)
    definitions = dict(store.fielddefs)
    for service, texts in _SERVICES.items():
        for suffix, text in zip(("_Request", "_Response"), texts, strict=True):
            # rosbags files a parsed .srv half under `<pkg>/srv/msg/<name>`; keep ROS's name.
            (parsed,) = get_types_from_msg(text, service + suffix).values()
            definitions[service + suffix] = parsed
    return definitions


def build_modules() -> dict[str, types.ModuleType]:
    """Modules like ``std_msgs``, ``std_msgs.msg``, ``std_srvs.srv`` holding the classes."""
    definitions = _definitions()
    for name, (consts, fields) in definitions.items():
        _CLASSES[name] = _make_class(name, consts, fields)
    modules: dict[str, types.ModuleType] = {}
    for name, cls in _CLASSES.items():
        package, kind, short = name.split("/")
        module = modules.setdefault(f"{package}.{kind}", types.ModuleType(f"{package}.{kind}"))
        setattr(module, short, cls)
        parent = modules.setdefault(package, types.ModuleType(package))
        setattr(parent, kind, module)
    for service in _SERVICES:
        package, kind, short = service.split("/")
        srv = type(short, (), {})
        srv.Request = _CLASSES[f"{service}_Request"]  # type: ignore[attr-defined]
        srv.Response = _CLASSES[f"{service}_Response"]  # type: ignore[attr-defined]
        setattr(modules[f"{package}.{kind}"], short, srv)
    return modules


def message_types() -> Any:
    """The node's ``conversions.MessageTypes`` from one build (sub-messages must be of the
    same build as the messages holding them)."""
    from sequence_ai_ros import conversions as conv

    modules = build_modules()
    std, trajectory = modules["std_msgs.msg"], modules["trajectory_msgs.msg"]
    builtin = modules["builtin_interfaces.msg"]
    return conv.MessageTypes(
        std.Float64MultiArray,
        std.MultiArrayDimension,
        trajectory.JointTrajectory,
        trajectory.JointTrajectoryPoint,
        modules["sensor_msgs.msg"].JointState,
        builtin.Duration,
        builtin.Time,
    )
