"""The ideal real-time-chunking (RTC) policy, for openpi's real ``WebsocketPolicyServer``.

``RtcTrajectoryPolicy`` is ``openpi_peer.TrajectoryPolicy`` (the reference trajectory in
time, served by ``openpi_peer.PeerServer``) reading the prefix and delay that a client
profile with ``rtc`` sends (``sequence_ai_core.openpi.rtc``: ``prev_chunk_left_over``, the
steps due from the observation on, and ``inference_delay``, the periods until the answer's
first step is due). It answers as an ideal RTC model would, its chunk starting exactly where
the prefix ends.

Each answer has a plan of its own: the reference, plus, with ``disagreement`` set, a
per-chunk offset and drift on every dimension (seeded by the request's number), as
consecutive chunks of real models disagree (``disagreement`` has the calibrated sizes).
With ``k`` prefix steps, the last due ``k - 1`` periods after the observation at ``t_obs``,
and a delay ``d``, step ``i`` is

    prefix[-1] + own(t_obs + (d + i) / hz) - own(t_obs + (k - 1) / hz)

the prefix's last value carried along the plan's own shape: its offset cancels, so nothing
jumps where the prefix ends, and the periods from ``k`` to ``d`` (steps from chunks the
client has not received yet) are bridged the same way. With an empty prefix the answer is
the plan from ``d`` periods on; without the keys, the plan from the observation on, which
with no disagreement is exactly ``TrajectoryPolicy``'s answer.

``python -m sequence_ai_sim.rtc_peer --port N [--disagreement SD]`` serves it as a process
(``bench/rtc.py`` does); like ``openpi_peer`` it needs ``openpi-server``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .disagreement import Spread
from .openpi_peer import TrajectoryPolicy, lookup, peer_parser, reference

#: A plan: times (n,) to steps (n, dim).
# an alias is evaluated at import: numpy 1.21's ndarray cannot be subscripted then, NDArray can
Plan = Callable[[npt.NDArray[Any]], npt.NDArray[Any]]
#: Chunks that agree: every answer lies on the reference (or continues the prefix along it).
AGREEING = Spread()
PREFIX_KEY = ("prev_chunk_left_over",)
DELAY_KEY = ("inference_delay",)


class RtcTrajectoryPolicy(TrajectoryPolicy):
    """An openpi ``BasePolicy`` whose chunks continue the prefix the client sends."""

    def __init__(
        self,
        *,
        disagreement: Spread = AGREEING,
        seed: int = 0,
        prefix_key: tuple[str, ...] = PREFIX_KEY,
        delay_key: tuple[str, ...] = DELAY_KEY,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.disagreement = disagreement
        self.seed = seed
        self.prefix_key = prefix_key
        self.delay_key = delay_key

    def actions(self, obs: Mapping[str, Any], t_obs: float, call: int) -> np.ndarray[Any, Any]:
        prefix, delay = lookup(obs, self.prefix_key), lookup(obs, self.delay_key)
        own = self._plan(t_obs, call)
        steps = np.arange(self.horizon) / self.control_hz
        if prefix is None or delay is None:
            return own(t_obs + steps)
        start = t_obs + int(delay) / self.control_hz
        prefix = np.asarray(prefix, dtype=np.float64)
        if len(prefix) == 0:
            return own(start + steps)
        last_at = t_obs + (len(prefix) - 1) / self.control_hz
        carried: np.ndarray[Any, Any] = prefix[-1] + own(start + steps) - own(np.array([last_at]))
        return carried

    def _plan(self, t_obs: float, call: int) -> Plan:
        """This answer's own plan as a function of time: the reference, offset and drifted
        by this chunk's draw."""
        rng = np.random.default_rng([self.seed, call])
        offset = self.disagreement.offset_sd * rng.standard_normal(self.action_dim)
        drift = self.disagreement.drift_sd * rng.standard_normal(self.action_dim)

        def own(times: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            since = (times - t_obs)[:, None]
            values: np.ndarray[Any, Any] = (
                reference(times, self.action_dim) + offset + since * drift
            )
            return values

        return own


def main() -> None:
    parser = peer_parser(__doc__)
    parser.add_argument(
        "--disagreement", type=float, default=0.0, help="per-chunk offset and drift sd"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    policy = RtcTrajectoryPolicy(
        action_dim=args.dim,
        control_hz=args.hz,
        horizon=args.horizon,
        latency_s=args.latency,
        disagreement=Spread(args.disagreement, args.disagreement),
        seed=args.seed,
    )
    from openpi_server import WebsocketPolicyServer

    print(f"openpi RTC policy server on ws://127.0.0.1:{args.port}", flush=True)
    WebsocketPolicyServer(policy, host="127.0.0.1", port=args.port).serve_forever()


if __name__ == "__main__":
    main()
