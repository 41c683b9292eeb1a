r"""Everything on one machine, no robot and no credit: the gateway simulator, a simulated arm
and the policy node, configured and activated, with an episode started automatically.

    ros2 launch sequence_ai_ros sim.launch.py [model:=lingbot-va-5b] [output_type:=joint_trajectory]
        [controller:=jtc_jazzy]

``controller`` puts a ros2_control controller model in front of the simulated joints
(forward_command for float64_multi_array; jtc_humble, jtc_jazzy, jtc_humble_open_loop,
jtc_jazzy_desired_state for joint_trajectory); its rejections are logged by sim_arm.

The simulator's key is taken from $SEQUENCES_SIM_API_KEY or generated for this launch; it
reaches the simulator and the node through their environments only, never a parameter.

A takeover from the command line, with the defaults (pi05-droid: seven joint speeds in
rad/s; the gripper has its own topic). The policy node is ``/sequence_ai``; sim_arm takes a
person's device on ``/operator_command`` (its ``command`` is remapped to the node's
``/action``), which the node records while taken over (``teleop_topic``):

    # take the arm: nothing goes out on /action until it is handed back
    ros2 topic pub --once /takeover std_msgs/msg/Bool "{data: true}"
    #   or: ros2 service call /sequence_ai/set_takeover std_srvs/srv/SetBool "{data: true}"
    # move it: joint_1 at 0.2 rad/s while this runs (Ctrl-C: the arm stops within 0.25 s)
    ros2 topic pub -r 10 /operator_command std_msgs/msg/Float64MultiArray \
        "{data: [0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}"
    # hand it back (the pub above stopped): the policy resumes from where the arm is now
    ros2 topic pub --once /takeover std_msgs/msg/Bool "{data: false}"
    #   or: ros2 service call /sequence_ai/set_takeover std_srvs/srv/SetBool "{data: false}"
    # end the episode with a label: true = success, false = failure
    ros2 service call /sequence_ai/end_episode std_srvs/srv/SetBool "{data: true}"
    # and start the next one
    ros2 service call /sequence_ai/start_episode std_srvs/srv/Trigger

An operator's command is a message of ``output_type``'s type with one value per joint:
speeds (rad/s) for pi05-droid and cosmos3-edge-policy-droid (seven joints) and
lingbot-vla-v2-6b (six), positions (rad) for lingbot-va-5b (six).
"""

import os
import secrets

import launch.events  # also binds `launch` (LaunchDescription)
import lifecycle_msgs.msg
from ament_index_python.packages import get_package_prefix
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    OpaqueFunction,
    RegisterEventHandler,
    TimerAction,
)
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState

from sequence_ai_ros import outputs
from sequence_ai_sim import CATALOGUE

PACKAGE = "sequence_ai_ros"


def _transition(node, transition_id):
    return EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=launch.events.matches_action(node),
            transition_id=transition_id,
        )
    )


def _policy_parameters(model, output_type, port):
    entry = CATALOGUE[model]
    views = list(entry.camera_views)
    return {
        "model": model,
        "base_url": f"http://127.0.0.1:{port}",
        "output_type": output_type,
        "joint_names": [f"joint_{i + 1}" for i in range(entry.joint_count)],
        "gripper_joint": "gripper",
        "gripper_dims": 1,
        "gripper_topic": "gripper_command",
        "camera_views": views,
        "camera_topics": [f"camera/{view}/image_raw/compressed" for view in views],
        "camera_encodings": ["compressed"] * len(views),
        "autostart": True,
        "max_actions": 100000,
        "startup_timeout_s": 30.0,
        "hardware_id": "sim_arm",
        "teleop_topic": "operator_command",  # sim_arm's, recorded while a person has the arm
    }


def _launch(context):
    model = LaunchConfiguration("model").perform(context)
    output_type = LaunchConfiguration("output_type").perform(context)
    port = LaunchConfiguration("port").perform(context)
    latency = LaunchConfiguration("latency").perform(context)
    controller = LaunchConfiguration("controller").perform(context)
    if model not in CATALOGUE:
        raise RuntimeError(f"model must be one of {sorted(CATALOGUE)}, got {model!r}")
    key = os.environ.get("SEQUENCES_SIM_API_KEY") or f"sim-{secrets.token_hex(16)}"
    simulator = ExecuteProcess(
        # this package's own `sequence-ai` (CMakeLists.txt installs it in <prefix>/bin), not
        # whichever one PATH finds first
        cmd=[
            os.path.join(get_package_prefix(PACKAGE), "bin", "sequence-ai"),
            "sim",
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--latency",
            latency,
        ],
        additional_env={"SEQUENCES_SIM_API_KEY": key},
        output="screen",
    )
    arm = Node(
        package=PACKAGE,
        executable="sim_arm_node",
        name="sim_arm",
        parameters=[
            {
                "model": model,
                "command_type": output_type,
                "image_format": "compressed",
                "controller": controller,
            }
        ],
        remappings=[("command", "action")],
        output="screen",
    )
    policy = LifecycleNode(
        package=PACKAGE,
        executable="policy_node",
        name="sequence_ai",
        namespace="",
        parameters=[_policy_parameters(model, output_type, port)],
        additional_env={"SEQUENCES_API_KEY": key},
        output="screen",
    )
    activate = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=policy,
            start_state="configuring",
            goal_state="inactive",
            entities=[_transition(policy, lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE)],
        )
    )
    # configure fetches the catalogue: give the simulator a moment to listen first.
    configure = TimerAction(
        period=2.0,
        actions=[_transition(policy, lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE)],
    )
    return [simulator, arm, policy, activate, configure]


def generate_launch_description():
    return launch.LaunchDescription(
        [
            DeclareLaunchArgument("model", default_value="pi05-droid"),
            DeclareLaunchArgument(
                "output_type",
                default_value=outputs.DEFAULT,
                description=" | ".join(outputs.names()),
            ),
            DeclareLaunchArgument(
                "controller",
                default_value="none",
                description="ros2_control model in the sim arm: none | forward_command | "
                "jtc_humble | jtc_jazzy | jtc_humble_open_loop | jtc_jazzy_desired_state",
            ),
            DeclareLaunchArgument("port", default_value="8765"),
            DeclareLaunchArgument(
                "latency", default_value="0.25", description="Simulated model latency, seconds."
            ),
            OpaqueFunction(function=_launch),
        ]
    )
