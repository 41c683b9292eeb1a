"""Raw parameter values into a ``NodeConfig``: each converted by its declaration, checked by
its rule and its relations, in the table's order; a ``ParameterError`` names the first
refused. The ``RunConfig`` and recorder settings are checked by the core first, so their
errors carry the core's words, as ``run()``'s do."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from sequence_ai_core import RunConfig
from sequence_ai_core.node_api import InvalidSetting, RecordConfig

from .. import diagnostics
from .config import CameraInput, NodeConfig, ParameterError
from .table import PARAMETERS, RUN_PARAMETERS


def _check(problem: str | None, name: str) -> None:
    if problem is not None:
        raise ParameterError(name, problem)


def _run(values: Mapping[str, Any]) -> RunConfig:
    settings = {name: values[name] for name in RUN_PARAMETERS}
    settings["control_hz"] = settings["control_hz"] or None  # 0: the chunk's own rate
    try:
        return RunConfig(**settings)
    except InvalidSetting as exc:
        note = " (or 0: the chunk's own rate)" if exc.setting == "control_hz" else ""
        raise ParameterError(exc.setting, exc.problem + note) from None


def _record(values: Mapping[str, Any]) -> RecordConfig | None:
    """The ``record_*`` parameters as the core recorder's ``RecordConfig``, or None when
    ``record_dir`` is empty; the image rate is checked either way. The directory is made
    absolute (``~`` expanded): the bag paths in diagnostics are then the ones to open,
    whatever directory the node was started in."""
    directory = values["record_dir"]
    path = os.path.abspath(os.path.expanduser(directory)) if directory else "."
    joints = values["joint_names"]
    try:
        config = RecordConfig(path, image_hz=values["record_image_hz"], joint_names=joints)
    except ValueError as exc:  # the only rule a parameter here can break: the image rate's
        raise ParameterError("record_image_hz", str(exc).removeprefix("image_hz ")) from None
    return config if directory else None


def _cameras(values: Mapping[str, Any]) -> tuple[CameraInput, ...]:
    views, topics = values["camera_views"], values["camera_topics"]
    encodings = values["camera_encodings"] or ("raw",) * len(views)
    return tuple(
        CameraInput(view, topic, encoding == "compressed")
        for view, topic, encoding in zip(views, topics, encodings, strict=True)
    )


def converted(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared parameter's raw value (unset arrays as None) as its kind holds it."""
    return {p.name: p.value(raw[p.name]) for p in PARAMETERS}


def check(values: Mapping[str, Any]) -> None:
    """Every rule, then every relation between parameters; raises ParameterError."""
    for parameter in PARAMETERS:
        _check(parameter.problem(values[parameter.name]), parameter.name)
    for parameter in PARAMETERS:
        for relation in parameter.relations:
            _check(relation.problem(parameter.name, values), parameter.name)


#: The ``NodeConfig`` fields that are not a parameter's value as it is: derived from one
#: or more. Every other field is the parameter of its name (test/ros/test_ros_parameters.py).
DERIVED = ("run", "cameras", "image_size", "base_url", "profile", "hardware_id", "record")


def parse(raw: Mapping[str, Any]) -> NodeConfig:
    """Validate raw parameter values (unset arrays as None); raises ParameterError."""
    values = converted(raw)
    run, record = _run(values), _record(values)
    check(values)
    width, height = values["image_size"]
    derived: dict[str, Any] = {
        "run": run,
        "cameras": _cameras(values),
        "image_size": (width, height),
        "base_url": values["base_url"] or None,
        "profile": values["profile"] or None,
        "hardware_id": diagnostics.hardware_id(values["hardware_id"], values["model"]),
        "record": record,
    }
    same = {f.name: values[f.name] for f in fields(NodeConfig) if f.name not in DERIVED}
    return NodeConfig(**same, **derived)
