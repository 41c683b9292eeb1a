"""diagnostic_updater as in ros/diagnostics' humble branch (Python): the Updater creates a
plain publisher on /diagnostics, declares ``diagnostic_updater.period`` unconditionally (a
second Updater on one node raises ParameterAlreadyDeclaredException), and runs its own timer."""

from __future__ import annotations

from typing import Any


def build(msgs: Any) -> dict[str, Any]:
    DiagnosticArray = msgs.DiagnosticArray
    DiagnosticStatus = msgs.DiagnosticStatus
    KeyValue = msgs.KeyValue

    class DiagnosticStatusWrapper(DiagnosticStatus):  # type: ignore[misc, valid-type]
        def summary(self, *args: Any) -> None:
            if len(args) == 1:
                self.level, self.message = args[0].level, args[0].message
            else:
                self.level, self.message = args[0], str(args[1])

        def add(self, key: str, val: str) -> None:
            self.values.append(KeyValue(key=key, value=val))

    class Updater:
        def __init__(self, node: Any, period: float = 1.0) -> None:
            self.tasks: list[tuple[str, Any]] = []
            self.node = node
            self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 1)
            self.period_parameter = "diagnostic_updater.period"
            self._period = node.declare_parameter(self.period_parameter, period).value
            self.timer = node.create_timer(self._period, self.update)
            self.hwid = ""

        def add(self, name: str, fn: Any) -> None:
            self.tasks.append((name, fn))
            stat = DiagnosticStatusWrapper()
            stat.name = name
            stat.summary(DiagnosticStatus.OK, "Node starting up")
            self.publish([stat])

        def update(self) -> None:
            statuses = []
            for name, fn in self.tasks:
                stat = DiagnosticStatusWrapper()
                stat.level = DiagnosticStatus.ERROR
                stat.name = name
                stat.message = "No message was set"
                stat.hardware_id = self.hwid
                statuses.append(fn(stat))
            self.publish(statuses)

        def force_update(self) -> None:
            self.update()

        def setHardwareID(self, hwid: str) -> None:
            self.hwid = hwid

        def publish(self, statuses: list[Any]) -> None:
            array = DiagnosticArray()
            array.header.stamp = self.node.get_clock().now().to_msg()
            for stat in statuses:
                out = DiagnosticStatus()
                out.name = f"{self.node.get_name()}: {stat.name}"
                out.message, out.hardware_id = stat.message, stat.hardware_id
                out.values, out.level = stat.values, stat.level
                array.status.append(out)
            self.publisher.publish(array)

    return {"Updater": Updater, "DiagnosticStatusWrapper": DiagnosticStatusWrapper}
