"""/diagnostics without diagnostic_updater, in the shape diagnostic_updater gives it.

diagnostic_updater has no PyPI wheel, and the node must report its health wherever rclpy runs,
so it publishes ``diagnostic_msgs/DiagnosticArray`` itself, on one code path everywhere. What
rqt_robot_monitor and diagnostic_aggregator see is what diagnostic_updater's Python Updater
(ros/diagnostics, Humble and Jazzy) would send: one status named ``"<node name>: <task>"``
with the hardware id, level, message and key-values, on ``/diagnostics`` once a second and
at once on every change that matters (``publish_now``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from . import diagnostics

PERIOD_S = 1.0  # diagnostic_updater's default period, which analyzers.yaml's timeout assumes
_LEVELS = {
    diagnostics.OK: DiagnosticStatus.OK,
    diagnostics.WARN: DiagnosticStatus.WARN,
    diagnostics.ERROR: DiagnosticStatus.ERROR,
}

Report = tuple[int, str, list[tuple[str, str]]]


class HealthPublisher:
    """Publishes ``report()`` as one DiagnosticStatus named ``"<node name>: <task>"``."""

    def __init__(self, node: Any, task: str, report: Callable[[], Report]) -> None:
        self._node = node
        self._report = report
        self.name = f"{node.get_name()}: {task}"
        self.hardware_id = ""
        # A plain publisher, not a lifecycle one: health matters most when not active.
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._timer = node.create_timer(PERIOD_S, self.publish_now)

    def publish_now(self) -> None:
        level, message, values = self._report()
        status = DiagnosticStatus(
            level=_LEVELS[level],
            name=self.name,
            message=message,
            hardware_id=self.hardware_id,
            values=[KeyValue(key=key, value=value) for key, value in values],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
        self._node.destroy_publisher(self._publisher)
