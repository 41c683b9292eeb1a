"""The output types: one module each, and this registry, the only list of them.

Every module here except ``base`` defines ``OUTPUT``, an ``OutputType``. The parameter's
choices (parameters/table.py), the node's publishers and messages (command_sink.py) and the
simulated arm's subscriptions (sim_arm_node.py) all look output types up here, so adding one
is adding a module (docs/node.md's parameter table, generated from parameters/table.py, then
lists it).
What the simulated arm reads from a message is the simulator's (``sequence_ai_sim.commands``),
by message type: only an output type with a message type new to it needs a reader there.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping

from .base import Envelope, OutputType
from .float64_multi_array import Float64MultiArrayOutput


def _discover() -> dict[str, OutputType]:
    found: dict[str, OutputType] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name == "base":
            continue
        output = importlib.import_module(f"{__name__}.{module_info.name}").OUTPUT
        if not isinstance(output, OutputType) or output.name in found:
            raise TypeError(f"{__name__}.{module_info.name}.OUTPUT is not a new OutputType")
        found[output.name] = output
    return found


#: Every output type, by its ``output_type`` parameter value.
OUTPUT_TYPES: Mapping[str, OutputType] = _discover()
#: The default: forward_command_controller takes the action as it is.
DEFAULT = Float64MultiArrayOutput.name


def names() -> tuple[str, ...]:
    return tuple(OUTPUT_TYPES)


def get(name: str) -> OutputType:
    """The output type called ``name``; KeyError naming the known ones."""
    try:
        return OUTPUT_TYPES[name]
    except KeyError:
        raise KeyError(f"unknown output type {name!r}; known: {', '.join(OUTPUT_TYPES)}") from None


__all__ = ["DEFAULT", "OUTPUT_TYPES", "Envelope", "OutputType", "get", "names"]
