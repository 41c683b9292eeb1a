"""sequence_ai_sim: a simulated gateway (and arm) for tests, benchmarks, the demo and
credit-free bench runs.

It speaks the gateway's wire contract over real HTTP on loopback, so it depends on
``sequence_ai_core`` only for the contract's shared types. The client's code points the other
way: ``sequence-ai sim`` loads ``sequence_ai_sim.cli`` by name, and only the demo imports the
simulator, inside its functions. ``python -m sequence_ai_sim`` is ``sequence-ai sim``.
"""

import logging

from .arm import SimulatedArm
from .catalogue import CATALOGUE, SimModel, reference_position
from .disagreement import LEVELS as DISAGREEMENT_LEVELS
from .disagreement import Disagreement, Spread
from .faults import Fault
from .server import GatewaySimulator

# Like the client: a library does not print. Configure logging to see the simulator's lines.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "CATALOGUE",
    "DISAGREEMENT_LEVELS",
    "Disagreement",
    "Fault",
    "GatewaySimulator",
    "SimModel",
    "SimulatedArm",
    "Spread",
    "reference_position",
]
