"""A simulated gateway (and arm) for tests, benchmarks, the demo and credit-free bench runs."""

from .arm import SimulatedArm
from .catalogue import CATALOGUE, SimModel, reference_position
from .faults import Fault
from .server import GatewaySimulator

__all__ = [
    "CATALOGUE",
    "Fault",
    "GatewaySimulator",
    "SimModel",
    "SimulatedArm",
    "reference_position",
]
