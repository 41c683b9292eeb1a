"""The node's parameters: each declared once (``table``: name, type, default, rule, meaning),
and everything read from the declarations: the typed ``NodeConfig`` and its validation
(``parsing``, ``model_check``), the ROS descriptors (``descriptors``) and docs/node.md's
table (docs/_generate.py). ROS-free, so that the rules can be tested directly."""

from .config import CameraInput, NodeConfig, ParameterError, connect_arguments
from .declaration import Kind, Parameter
from .descriptors import Descriptor, descriptor
from .model_check import check_against_model
from .parsing import parse
from .secret_names import secret_parameter_names
from .table import PARAMETERS, RUN_PARAMETERS

__all__ = [
    "PARAMETERS",
    "RUN_PARAMETERS",
    "CameraInput",
    "Descriptor",
    "Kind",
    "NodeConfig",
    "Parameter",
    "ParameterError",
    "check_against_model",
    "connect_arguments",
    "descriptor",
    "parse",
    "secret_parameter_names",
]
