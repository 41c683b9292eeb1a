"""The real ROS message classes, handed to the ROS-free message builders (``conversions``).

Its own module so that both nodes take the classes from one place without either importing
the other's interfaces: the policy node publishes through them, the simulated arm subscribes
to the same classes (an output type's ``message_type(MESSAGE_TYPES)``).
"""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from .conversions import MessageTypes

#: The real message classes, for the ROS-free message builders.
MESSAGE_TYPES = MessageTypes(
    Float64MultiArray=Float64MultiArray,
    MultiArrayDimension=MultiArrayDimension,
    JointTrajectory=JointTrajectory,
    JointTrajectoryPoint=JointTrajectoryPoint,
    JointState=JointState,
    Duration=Duration,
    Time=Time,
)
