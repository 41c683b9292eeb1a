"""Real rclpy: the node as shipped, with ``base_url: ws://...`` and ``profile: droid``, driving
openpi's real ``WebsocketPolicyServer`` (PyPI openpi-server) serving our trajectory policy in
the test process, against the simulated arm's raw camera frames and joint states."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from std_msgs.msg import Float64MultiArray
from support import TEST_KEY
from support.realros import Tier, tier, wait_for
from support.realros.nodes import HoldServer, PolicyNode, policy_params, sim_arm

from sequence_ai_sim.openpi_peer import PeerServer, TrajectoryPolicy

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
OPENPI_KEY = "sk-openpi-ros-0123456789"


def _node(tier: Tier, server: PeerServer, **changes: Any) -> PolicyNode:
    values = policy_params(
        SimpleNamespace(url=server.url),  # type: ignore[arg-type]
        tier,
        profile="droid",
        compressed=False,
        **changes,
    )
    return PolicyNode(tier, None, params=values, env={"OPENPI_API_KEY": OPENPI_KEY})


def test_the_node_drives_an_openpi_server_through_the_droid_profile(tier: Tier) -> None:
    peer = TrajectoryPolicy(action_dim=8, control_hz=15.0, latency_s=0.05, timestamp_key=None)
    with PeerServer(peer, metadata={"name": "ros-peer"}) as server:
        sim_arm(tier, image_format="raw")
        node = _node(tier, server, max_actions=30)
        actions = tier.probe.listen(Float64MultiArray, "action")
        grippers = tier.probe.listen(Float64MultiArray, "gripper_command")
        node.bring_up()
        node.start_episode()
        end = node.episode_end(1)
        assert end["last.reason"] == "completed", end
        played = actions.wait_count(30)
        assert all(len(m.data) == 7 and all(math.isfinite(v) for v in m.data) for m in played)
        assert grippers.wait_count(1) and len(grippers.snapshot()[0].data) == 1
        received = peer.received[0]
        assert received["observation/exterior_image_1_left"].shape == (224, 224, 3)
        assert received["observation/wrist_image_left"].dtype == np.uint8
        assert received["observation/joint_position"].shape == (7,)
        assert received["observation/gripper_position"].shape == (1,)
        assert peer.calls >= 3
    output = node.output()
    assert "openpi/droid" in output and OPENPI_KEY not in output + repr(node.statuses())
    assert TEST_KEY not in repr(peer.received)


def test_a_server_exception_mid_episode_holds_once(tier: Tier) -> None:
    peer = TrajectoryPolicy(action_dim=8, control_hz=15.0, latency_s=0.05, timestamp_key=None)

    def fail() -> dict[str, Any]:
        raise RuntimeError(f"checkpoint gone (key {OPENPI_KEY})")

    peer.answers[4] = fail
    with PeerServer(peer) as server:
        sim_arm(tier, image_format="raw")
        hold = HoldServer(tier)
        node = _node(tier, server, max_actions=400, hold_service=f"{tier.namespace}/arm/hold")
        actions = tier.probe.listen(Float64MultiArray, "action")
        node.bring_up()
        node.start_episode()
        end = node.episode_end(1)
        assert end["last.reason"] == "raised:ServerRaised", end
        assert wait_for(lambda: hold.calls == 1, what="one hold service call")
        assert wait_for(lambda: not any(actions.snapshot()[-1].data), what="the zero hold")
        status = node.status_where(lambda s: "ServerRaised" in s.message, "the fault status")
        assert "checkpoint gone" in status.message
    assert OPENPI_KEY not in node.output() + repr(node.statuses())
