"""ROS 2 front end of sequence_ai_core, for Humble (rclpy 3.3) and Jazzy (rclpy 7.1): a
lifecycle node and a simulated arm node.

The package's own interfaces (``sequence_ai_ros.msg``, ``.srv``, ``.action``) are generated
beside these modules by the colcon build from ``msg/``, ``srv/`` and ``action/``.

Only ``policy_node``, ``node_io``, ``interfaces``, ``messages``, ``health_publisher``,
``rclpy_guards``, ``episode_action``, ``chunk_validator``, ``sensor_inputs`` and
``sim_arm_node`` import rclpy or message packages; every other module here (the output types
in ``outputs/`` and the parameters in ``parameters/`` included) is plain Python, so it can be
tested and reused without ROS.
"""
