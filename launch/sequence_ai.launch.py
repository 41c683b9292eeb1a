"""Start the policy node as a lifecycle node and take it to active (configure, then activate).

    ros2 launch sequence_ai_ros sequence_ai.launch.py params_file:=/path/to/params.yaml \
        action_topic:=/forward_velocity_controller/commands

The API key is read from $SEQUENCES_API_KEY (or the credentials file) by the node itself;
it is never a launch argument or a parameter.
"""

import os

import launch.events  # also binds `launch` (LaunchDescription)
import lifecycle_msgs.msg
from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState

PACKAGE = "sequence_ai_ros"

# (launch argument, topic the node uses, default target, description)
REMAPPINGS = (
    ("action_topic", "action", "action", "Where actions go, e.g. a controller's ~/commands."),
    ("gripper_topic", "gripper_command", "gripper_command", "Gripper dims (gripper_topic param)."),
    ("joint_states_topic", "joint_states", "joint_states", "sensor_msgs/JointState input."),
    ("instruction_topic", "instruction", "instruction", "std_msgs/String instruction."),
    ("estop_topic", "estop", "estop", "std_msgs/Bool e-stop (latched)."),
)


def _transition(node, transition_id):
    return EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=launch.events.matches_action(node),
            transition_id=transition_id,
        )
    )


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    arguments = [
        DeclareLaunchArgument("name", default_value="sequence_ai", description="Node name."),
        DeclareLaunchArgument("namespace", default_value="", description="Node namespace."),
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(share, "config", "pi05_droid.yaml"),
            description="Parameter YAML for the node.",
        ),
        DeclareLaunchArgument(
            "aggregator",
            default_value="true",
            description="Start diagnostic_aggregator (rqt_robot_monitor reads /diagnostics_agg).",
        ),
    ]
    arguments += [
        DeclareLaunchArgument(arg, default_value=default, description=text)
        for arg, _, default, text in REMAPPINGS
    ]
    node = LifecycleNode(
        package=PACKAGE,
        executable="policy_node",
        name=LaunchConfiguration("name"),
        namespace=LaunchConfiguration("namespace"),
        parameters=[LaunchConfiguration("params_file")],
        remappings=[(topic, LaunchConfiguration(arg)) for arg, topic, _, _ in REMAPPINGS],
        output="screen",
    )
    configure = _transition(node, lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE)
    # Activate once configure succeeded; a failed configure leaves the node unconfigured.
    activate_when_inactive = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node,
            start_state="configuring",
            goal_state="inactive",
            entities=[_transition(node, lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE)],
        )
    )
    aggregator = Node(
        package="diagnostic_aggregator",
        executable="aggregator_node",
        parameters=[os.path.join(share, "config", "analyzers.yaml")],
        condition=IfCondition(LaunchConfiguration("aggregator")),
        output="screen",
    )
    return launch.LaunchDescription(
        [*arguments, node, activate_when_inactive, configure, aggregator]
    )
