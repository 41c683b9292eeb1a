"""The node's I/O wired together: its ROS interfaces (``interfaces.py``), the latest inputs
(``inputs.py``), the command sink on the interfaces' publishers (``command_sink.py``), and
the ROS-free control step that plays through them (``control.py``)."""

from __future__ import annotations

from typing import Any

from sequence_ai_core import Model

from . import outputs
from .command_sink import CommandSink, gripper_joint_names
from .control import Control
from .inputs import InputStore
from .interfaces import EpisodeController, NodeInterfaces
from .messages import MESSAGE_TYPES
from .parameters import NodeConfig


class NodeIO:
    def __init__(
        self, node: Any, config: NodeConfig, model: Model, *, controller: EpisodeController
    ) -> None:
        self.config = config
        self.model = model
        self.output = outputs.get(config.output_type)
        self.inputs = InputStore(config)
        self.interfaces = NodeInterfaces(node, config, self.inputs, controller)
        self._control: Control | None = None

    def create(self) -> None:
        publishers = self.interfaces.create(self.output)
        sink = CommandSink(
            self.config, self.output, MESSAGE_TYPES, publishers, self.interfaces.now_ns
        )
        self._control = Control(self.config, self.inputs, sink, self.interfaces)
        self.inputs.warm_up()

    def destroy(self) -> None:
        self.interfaces.destroy()
        self._control = None

    def dimension_names(self, action_dim: int) -> list[str]:
        """A name per action dimension: the arm joints, then the gripper dims (``dim_<i>``
        when the parameters do not name them all)."""
        names = list(self.config.joint_names) + gripper_joint_names(self.config)
        return names if len(names) == action_dim else [f"dim_{i}" for i in range(action_dim)]

    @property
    def control(self) -> Control:
        if self._control is None:  # a bug in the caller: refuse to send, loudly
            raise RuntimeError("NodeIO.create() has not run: no publishers to send on")
        return self._control
