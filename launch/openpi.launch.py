"""The policy node driving an openpi policy server (openpi's WebsocketPolicyServer) instead of
the gateway: ``sequence_ai.launch.py`` with ``config/openpi_droid.yaml`` (``base_url:
ws://127.0.0.1:8000``, ``profile: droid``; copy it to point at another server or profile).

    ros2 launch sequence_ai_ros openpi.launch.py params_file:=/path/to/my_openpi.yaml \
        action_topic:=/forward_velocity_controller/commands

Start the server first (in openpi: ``uv run scripts/serve_policy.py --env DROID``). A key, if
the server wants one, comes from $OPENPI_API_KEY in the node's environment, never a launch
argument or a parameter. Every argument of ``sequence_ai.launch.py`` passes through.
"""

import os

import launch.actions  # also binds `launch` (LaunchDescription)
from ament_index_python.packages import get_package_share_directory
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

PACKAGE = "sequence_ai_ros"


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    params_file = launch.actions.DeclareLaunchArgument(
        "params_file",
        default_value=os.path.join(share, "config", "openpi_droid.yaml"),
        description="Parameter YAML: base_url ws://..., profile, joints, cameras, limits.",
    )
    node = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "sequence_ai.launch.py")),
        launch_arguments={"params_file": LaunchConfiguration("params_file")}.items(),
    )
    return launch.LaunchDescription([params_file, node])
