"""Drive a base around a square on its odometry, and measure how well the square closes.

:class:`SquareDriver` is the pure control logic (pose in, velocity out);
:func:`steer_square` steers it on the freshest odometry until the square is
done (or stopped) and then stops the base; :func:`run_square` runs it end to
end: the mecanum simulation on a pty in real time, the bridge's
:class:`~bridge.node.base_node.BaseNode` on that pty (the ``use_sim`` seam:
the node opens the pty like any port), and the driver feeding the node's
velocity requests from its odometry. The result compares the node's odometry
with the simulation's true pose.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fwbridge.bridge.node.base_node import BaseNode, NodeEvent
from fwbridge.bridge.node.config import RobotConfig
from fwbridge.bridge.node.odometry import Odometry
from fwbridge.bridge.node.sinks import Sink
from fwbridge.bridge.sim.endpoint import SimEndpoint
from fwbridge.bridge.sim.faults import FaultSpec
from fwbridge.bridge.sim.models.mecanum import MecanumBase, MecanumParams
from fwbridge.bridge.sim.pty_link import PtyLink

__all__ = ["OdomSlot", "SquareDriver", "SquareResult", "Tick", "run_square", "square_base",
           "square_tolerance", "steer_square"]

Pose = tuple[float, float, float]
Tick = Callable[["SquareDriver", Odometry | None, Pose], None]


def _wrap(a: float) -> float:
    return math.atan2(math.sin(a), math.cos(a))


def _clamp(v: float, lim: float) -> float:
    return max(-lim, min(lim, v))


@dataclass
class SquareDriver:
    """Drive each side facing along it, turn 90° left at each corner, end where it began.

    Closed loop on the pose it is given: a proportional controller on the
    distance to the next corner (holonomic: strafes out lateral error) and
    on heading, with speed and acceleration limits; a corner is reached
    after ``hold`` consecutive updates within ``pos_tol`` / ``yaw_tol`` and,
    when the measured velocity is given, nearly at rest (so a pose that is
    not refreshed, or one swept through at speed, does not count).
    """

    side: float = 1.0
    speed: float = 0.3  # m/s
    turn_rate: float = 1.2  # rad/s
    accel: float = 0.6  # m/s^2
    turn_accel: float = 3.0  # rad/s^2
    k_pos: float = 4.0  # 1/s
    k_yaw: float = 5.0  # 1/s
    pos_tol: float = 0.004  # m
    yaw_tol: float = math.radians(0.5)
    hold: int = 3
    rest_speed: float = 0.01  # m/s
    rest_turn: float = 0.05  # rad/s
    holonomic: bool = True

    def __post_init__(self) -> None:
        s = self.side
        self.corners = [(0.0, 0.0), (s, 0.0), (s, s), (0.0, s), (0.0, 0.0)]
        self.leg = 0  # 0..3
        self.phase = "drive"
        self._ok = 0
        self._cmd = (0.0, 0.0, 0.0)

    @property
    def done(self) -> bool:
        return self.leg >= 4

    @property
    def heading(self) -> float:
        return self.leg * math.pi / 2.0

    def update(
        self, pose: Pose, dt: float, velocity: tuple[float, float, float] | None = None
    ) -> tuple[float, float, float]:
        """The command (body vx, vy, wz) for ``pose`` (and measured ``velocity``), ``dt`` later."""
        if self.done:
            self._cmd = (0.0, 0.0, 0.0)
            return self._cmd
        x, y, yaw = pose
        tx, ty = self.corners[self.leg + 1]
        ex, ey = tx - x, ty - y
        dist = math.hypot(ex, ey)
        if self.phase == "drive":
            goal_yaw = self.heading
            v = min(self.speed, self.k_pos * dist, math.sqrt(2.0 * self.accel * 0.8 * dist))
            reached = dist < self.pos_tol
        else:
            goal_yaw = self.heading + math.pi / 2.0
            v = min(self.speed, self.k_pos * dist)
            reached = abs(_wrap(goal_yaw - yaw)) < self.yaw_tol
        if velocity is not None:
            vx, vy, vw = velocity
            reached = reached and math.hypot(vx, vy) < self.rest_speed and abs(vw) < self.rest_turn
        yaw_err = _wrap(goal_yaw - yaw)
        w_lim = min(self.turn_rate, math.sqrt(2.0 * self.turn_accel * 0.8 * abs(yaw_err)))
        wz = _clamp(self.k_yaw * yaw_err, w_lim)
        if dist > 1e-9:
            c, s = math.cos(yaw), math.sin(yaw)
            bx, by = (ex * c + ey * s) / dist * v, (-ex * s + ey * c) / dist * v
        else:
            bx = by = 0.0
        if not self.holonomic:
            by = 0.0
        cmd = self._ramp((bx, by, wz), dt)
        self._ok = self._ok + 1 if reached else 0
        if self._ok >= self.hold:
            self._ok = 0
            if self.phase == "drive":
                self.phase = "turn"
            else:
                self.phase = "drive"
                self.leg += 1
        return cmd

    def _ramp(self, cmd: tuple[float, float, float], dt: float) -> tuple[float, float, float]:
        """Limit the change of the command to the acceleration limits."""
        px, py, pw = self._cmd
        dv = self.accel * dt
        dw = self.turn_accel * dt
        out = (
            px + _clamp(cmd[0] - px, dv),
            py + _clamp(cmd[1] - py, dv),
            pw + _clamp(cmd[2] - pw, dw),
        )
        self._cmd = out
        return out


def square_tolerance(driver: SquareDriver, params: MecanumParams) -> float:
    """How far the true pose may end from the start when the odometry says it closed.

    The driver stops within ``pos_tol`` of the start by its odometry. The
    odometry errs, per side, by one encoder count per wheel (forward
    kinematics averages them) plus its timing: the host integrates each
    frame over its own arrival interval instead of the firmware's window,
    and summed over a side that error is the arrival jitter times the total
    variation of the speed (0 -> v -> 0, so 2 v); the jitter is taken as
    half an odometry period, beyond which frames could not be told apart.
    """
    count = params.geometry.wheel_radius * 2.0 * math.pi / params.cpr
    jitter = params.odom_period_ms / 1000.0 / 2.0
    per_side = count + 2.0 * driver.speed * jitter
    return driver.pos_tol + 4 * per_side


@dataclass
class SquareResult:
    """What :func:`run_square` measured; distances in m, angles in degrees."""

    odom_path: list[tuple[float, float, float, float]] = field(default_factory=list)  # t, x, y, yaw
    truth_path: list[tuple[float, float, float, float]] = field(default_factory=list)
    odom_end: Pose = (0.0, 0.0, 0.0)
    truth_end: Pose = (0.0, 0.0, 0.0)
    seconds: float = 0.0
    completed: bool = False
    node_stats: dict[str, int] = field(default_factory=dict)
    sim_status: dict[str, Any] = field(default_factory=dict)
    events: list[NodeEvent] = field(default_factory=list)
    tolerance: float = 0.0

    @property
    def odom_closing(self) -> float:
        """Distance from the start at the end, by the bridge's odometry."""
        return math.hypot(self.odom_end[0], self.odom_end[1])

    @property
    def truth_closing(self) -> float:
        """Distance from the start at the end, by the simulation's true pose."""
        return math.hypot(self.truth_end[0], self.truth_end[1])

    @property
    def odom_error(self) -> float:
        """Odometry position error against the truth at the end."""
        return math.hypot(
            self.odom_end[0] - self.truth_end[0], self.odom_end[1] - self.truth_end[1]
        )

    @property
    def truth_yaw_error(self) -> float:
        return math.degrees(_wrap(self.truth_end[2]))


class OdomSlot:
    """The latest odometry, handed from the thread that receives it to the one that steers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._odom: Odometry | None = None
        self.count = 0

    def put(self, odom: Odometry) -> None:
        with self._lock:
            self._odom = odom
            self.count += 1

    def put_made(self, make: Callable[[int], Odometry]) -> None:
        """Put ``make(n)``, n the count of records put so far, this one included."""
        with self._lock:
            self.count += 1
            self._odom = make(self.count)

    def get(self) -> Odometry | None:
        with self._lock:
            return self._odom


def steer_square(
    driver: SquareDriver, truth: Callable[[], Pose], odometry: OdomSlot,
    send: Callable[[float, float, float], None], result: SquareResult, *,
    rate_hz: float = 50.0, timeout_s: float = 90.0, on_tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> SquareResult:
    """Steer ``driver`` on the fresh odometry of ``odometry`` at ``rate_hz``, ``send`` its
    commands, until the square is done, ``stop`` is set or ``timeout_s`` passed; then send
    zero velocity, let the base settle and fill in ``result``'s paths and ends."""
    stop = stop or threading.Event()
    t0 = time.monotonic()
    period = 1.0 / rate_hz
    next_tick, last, seq = t0, t0, -1
    while not driver.done and not stop.is_set():
        now = time.monotonic()
        if now - t0 > timeout_s:
            break
        odom = odometry.get()
        # Steer on fresh odometry only; when it stops, so do the requests, and
        # the node's watchdog stops the base.
        if odom is not None and odom.seq != seq:
            seq = odom.seq
            pose = (odom.x, odom.y, odom.yaw)
            send(*driver.update(pose, now - last, (odom.vx, odom.vy, odom.wz)))
            last = now
            result.odom_path.append((now - t0, *pose))
        where = truth()
        result.truth_path.append((now - t0, *where))
        if on_tick is not None:
            on_tick(driver, odom, where)
        next_tick += period
        stop.wait(max(0.0, next_tick - time.monotonic()))
    result.completed = driver.done
    send(0.0, 0.0, 0.0)
    stop.wait(0.4)  # let the base settle and the last frames arrive
    odom = odometry.get()
    if odom is not None:
        result.odom_end = (odom.x, odom.y, odom.yaw)
    result.truth_end = truth()
    result.seconds = time.monotonic() - t0
    return result


@contextmanager
def square_base(driver: SquareDriver, result: SquareResult, *, faults: FaultSpec | None,
                rate_hz: float, sinks: Sequence[Sink],
                on_odometry: Callable[[Odometry], Any] | None = None,
                ) -> Iterator[tuple[MecanumBase, BaseNode]]:
    """The simulated mecanum base on a pty and the base node on it (the square's
    ``result`` gets its tolerance, the node's events and the simulator's status); the
    node stops first on every way out, its stop sending zero velocity."""
    model = MecanumBase()
    endpoint = SimEndpoint(model, pacing="realtime", faults=faults)
    result.tolerance = square_tolerance(driver, model.params)
    with PtyLink(endpoint, supervisor=False) as link:
        endpoint.start()
        # The use_sim seam: the node opens the simulated endpoint's pty like any port.
        config = RobotConfig(sim_url=link.path, use_sim=True, rate_hz=rate_hz, source="<demo>")
        node = BaseNode(config, sinks=sinks, on_odometry=on_odometry,
                        on_event=result.events.append)
        node.start()
        try:
            yield model, node
        finally:
            node.stop()
            endpoint.stop()
            result.sim_status = endpoint.status()


def run_square(
    *,
    driver: SquareDriver | None = None,
    faults: FaultSpec | None = None,
    rate_hz: float = 50.0,
    timeout_s: float = 90.0,
    on_tick: Tick | None = None,
    stop: threading.Event | None = None,
    sinks: Sequence[Sink] = (),
) -> SquareResult:
    """Simulated mecanum base on a pty, the base node on it, the driver on the node;
    ``sinks`` (a capture, a live view) get the node's bytes and records; the node
    closes them when it stops."""
    driver = driver or SquareDriver()
    result = SquareResult()
    latest = OdomSlot()
    with square_base(driver, result, faults=faults, rate_hz=rate_hz, sinks=sinks,
                     on_odometry=latest.put) as (model, node):
        steer_square(driver, lambda: model.pose, latest, node.request, result,
                     rate_hz=rate_hz, timeout_s=timeout_s, on_tick=on_tick, stop=stop)
        result.node_stats = node.stats()
    return result
