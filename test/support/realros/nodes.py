"""The project's two nodes as processes, and the operator's side of them (lifecycle, services,
e-stop, diagnostics) through the probe."""

from __future__ import annotations

import signal
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.catalogue import find_model
from support import TEST_KEY

from . import RosProcess, Tier, wait_for

TRANSITIONS = {
    "configure": Transition.TRANSITION_CONFIGURE,
    "cleanup": Transition.TRANSITION_CLEANUP,
    "activate": Transition.TRANSITION_ACTIVATE,
    "deactivate": Transition.TRANSITION_DEACTIVATE,
    "unconfigured_shutdown": Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
    "inactive_shutdown": Transition.TRANSITION_INACTIVE_SHUTDOWN,
    "active_shutdown": Transition.TRANSITION_ACTIVE_SHUTDOWN,
}
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
NODE = "sequence_ai"


def policy_params(sim: GatewaySimulator, tier: Tier, **changes: Any) -> dict[str, Any]:
    """Parameters that wire the node to ``sim_arm`` for the model (default pi05-droid)."""
    compressed = changes.pop("compressed", True)
    suffix = "image_raw/compressed" if compressed else "image_raw"
    model = find_model(str(changes.get("model", ""))) or find_model("pi05-droid")
    assert model is not None
    views = list(model.camera_views)
    values: dict[str, Any] = {
        "base_url": sim.url,
        "joint_names": [f"joint_{i + 1}" for i in range(model.joint_count)],
        "gripper_joint": "gripper",
        "gripper_dims": 1,
        "gripper_topic": "gripper_command",
        "camera_views": views,
        "camera_topics": [f"camera/{v}/{suffix}" for v in views],
        "camera_encodings": ["compressed" if compressed else "raw"] * len(views),
        "image_size": [64, 64],
        "max_actions": 500,
        # Generous: 5 test runs share 2 cores here, and a starved arm process is not what
        # these tests are about (the stale-input tests set their own, tight age).
        "max_observation_age_s": 2.0,
        "hardware_id": tier.namespace,  # tells this test's status from any other on /diagnostics
    }
    values.update(changes)
    return values


class PolicyNode:
    """The policy node process and the operator's handles on it."""

    def __init__(
        self,
        tier: Tier,
        sim: GatewaySimulator | None,
        *,
        env: dict[str, str] | None = None,
        raw_args: list[str] | None = None,
        params: dict[str, Any] | None = None,
        **changes: Any,
    ) -> None:
        self.tier = tier
        values = params if params is not None else policy_params(sim, tier, **changes)  # type: ignore[arg-type]
        self.process: RosProcess = tier.start(
            "sequence_ai_ros.policy_node",
            "policy_node",
            params=values,
            env={"SEQUENCES_API_KEY": TEST_KEY, "XDG_CONFIG_HOME": str(tier.logs), **(env or {})},
            raw_args=raw_args,
        )
        self.probe = tier.probe
        self.diagnostics = self.probe.listen(DiagnosticArray, "/diagnostics")
        self._estop_pubs: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle

    def wait_up(self) -> None:
        try:
            self.state()
        except AssertionError as exc:
            raise AssertionError(f"policy node did not come up:\n{self.process.output()}") from exc

    def transition(self, name: str) -> bool:
        request = ChangeState.Request(transition=Transition(id=TRANSITIONS[name]))
        return bool(self.probe.call(ChangeState, f"{NODE}/change_state", request).success)

    def transition_by_label(self, label: str) -> bool:
        request = ChangeState.Request(transition=Transition(label=label))
        return bool(self.probe.call(ChangeState, f"{NODE}/change_state", request).success)

    def state(self) -> str:
        answer = self.probe.call(GetState, f"{NODE}/get_state", idempotent=True)
        return str(answer.current_state.label)

    def bring_up(self) -> None:
        self.wait_up()
        assert self.transition("configure"), self.process.output()
        assert self.transition("activate"), self.process.output()

    # ------------------------------------------------------------------ operator

    def trigger(self, service: str) -> Any:
        return self.probe.call(Trigger, f"{NODE}/{service}")

    def start_episode(self) -> None:
        answer = self.trigger("start_episode")
        assert answer.success, answer.message

    def estop(self, engaged: bool, *, latched: bool = True, matched: bool = True) -> None:
        """Publish on estop as a latched (reliable + transient local) or a default publisher;
        ``matched``: once the node's subscriptions are there (else it must see it on join)."""
        kind = "latched" if latched else "default"
        if kind not in self._estop_pubs:
            publisher = self.probe.publisher(Bool, "estop", LATCHED if latched else 10)
            if matched:  # a latched publisher matches 3 e-stop subscriptions, a default one 2
                self.probe.matched(publisher, 3 if latched else 2)
            self._estop_pubs[kind] = publisher
        self._estop_pubs[kind].publish(Bool(data=engaged))

    # ------------------------------------------------------------------ diagnostics

    def statuses(self) -> list[Any]:
        """This node's DiagnosticStatus messages so far, oldest first."""
        ours = []
        for array in self.diagnostics.snapshot():
            ours += [s for s in array.status if s.hardware_id == self.tier.namespace]
        return ours

    def status_where(self, check: Any, what: str) -> Any:
        """The first status from now on for which ``check(status)`` holds."""
        start = len(self.statuses())
        return wait_for(
            lambda: next((s for s in self.statuses()[start:] if check(s)), None), what=what
        )

    def last_status(self) -> Any:
        return wait_for(lambda: (self.statuses() or [None])[-1], what="a diagnostics status")

    def values(self, status: Any) -> dict[str, str]:
        return {kv.key: kv.value for kv in status.values}

    def episode_end(self, number: int) -> dict[str, str]:
        """Key-values of the first status after episode ``number`` ended."""

        def ended(status: Any) -> bool:
            values = self.values(status)
            return values.get("episode") == str(number) and values.get("episode_running") == "False"

        return self.values(
            wait_for(
                lambda: next((s for s in self.statuses() if ended(s)), None),
                what=f"episode {number} to end",
            )
        )

    # ------------------------------------------------------------------ process

    def interrupt(self, sig: int = signal.SIGINT) -> int:
        self.process.signal(sig)
        return self.process.wait()

    def output(self) -> str:
        return self.process.output()


def sim_arm(
    tier: Tier,
    *,
    command_type: str = "float64_multi_array",
    model: str = "pi05-droid",
    image_format: str = "compressed",
    camera_hz: float = 10.0,
    controller: str = "none",
) -> RosProcess:
    """``controller``: the ros2_control controller model in front of the joints (sim_arm_node)."""
    return tier.start(
        "sequence_ai_ros.sim_arm_node",
        "sim_arm",
        params={
            "model": model,
            "command_type": command_type,
            "image_format": image_format,
            "camera_hz": camera_hz,
            "controller": controller,
        },
        remaps={"command": "action"},
    )


class HoldServer:
    """The arm driver's std_srvs/Trigger hold service, served by the probe."""

    def __init__(self, tier: Tier) -> None:
        self.calls = 0
        tier.probe.node.create_service(Trigger, "arm/hold", self._serve)

    def _serve(self, request: Any, response: Any) -> Any:
        self.calls += 1
        response.success, response.message = True, "holding"
        return response
