"""ROS 2 Humble front end of sequence_ai_core: a lifecycle node and a simulated arm node.

Only ``policy_node`` and ``sim_arm_node`` import rclpy; every other module here is plain Python
so it can be tested and reused without a ROS installation.
"""
