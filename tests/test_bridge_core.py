"""The mobile-base logic with an exact, injected clock: odometry, watchdog, schedule, health."""

from __future__ import annotations

import math
import random

import pytest

from fwbridge.bridge.node.base_node import ZERO_FRAME, BaseNodeCore
from fwbridge.bridge.node.config import Calibration
from fwbridge.bridge.node.health import GarbageWatch
from fwbridge.bridge.node.odometry import OdometryIntegrator, quaternion_from_yaw
from fwbridge.protocols import cmd_frame, odom_frame
from fwbridge.protocols.odom_frame import OdomFrame


def f32(x: float) -> float:
    """``x`` as the firmware's float32 sends it."""
    return odom_frame.decode(odom_frame.encode(OdomFrame(x, 0, 0, 0))).vx


def circle_run(v: float, w: float, h: float, n: int, t0: float = 10.0) -> BaseNodeCore:
    """n+1 frames of a base driving a circle, yaw from its IMU, at t0 + k*h."""
    core = BaseNodeCore(now=t0)
    for k in range(n + 1):
        frame = OdomFrame(v, 0.0, w, math.degrees(w * k * h))
        core.receive(odom_frame.encode(frame), now=t0 + k * h)
    return core


@pytest.mark.parametrize(("v", "w", "h", "n"), [(0.5, 0.8, 0.005, 400), (0.2, -1.5, 0.01, 300),
                                                (1.0, 0.1, 0.02, 150)])
def test_constant_velocity_pose_matches_closed_form(v: float, w: float, h: float, n: int) -> None:
    core = circle_run(v, w, h, n)
    integ = core.integrator
    # The seed's update, summed: x = v*h*sum(cos(k*w*h)), y = v*h*sum(sin(k*w*h)), k = 1..n
    # (the first frame sets the time reference). Dirichlet-kernel closed forms:
    th = w * h
    ratio = math.sin(n * th / 2) / math.sin(th / 2)
    x_sum = f32(v) * h * ratio * math.cos((n + 1) * th / 2)
    y_sum = f32(v) * h * ratio * math.sin((n + 1) * th / 2)
    assert integ.x == pytest.approx(x_sum, abs=1e-5)
    assert integ.y == pytest.approx(y_sum, abs=1e-5)
    # ...and within one step of the continuous arc v/w (sin wT, 1 - cos wT).
    t = n * h
    assert integ.x == pytest.approx(v / w * math.sin(w * t), abs=abs(v) * h * 1.01)
    assert integ.y == pytest.approx(v / w * (1 - math.cos(w * t)), abs=abs(v) * h * 1.01)
    assert integ.seq == n + 1


def test_body_velocity_is_rotated_by_the_firmware_yaw_not_integrated_wz() -> None:
    core = BaseNodeCore(now=0.0)
    # wz says "spinning" but the IMU yaw stays at 30 degrees: the seed uses the yaw.
    for k in range(101):
        core.receive(odom_frame.encode(OdomFrame(0.4, 0.1, 2.0, 30.0)), now=k * 0.01)
    th = math.radians(f32(30.0))
    vx, vy = f32(0.4), f32(0.1)
    assert core.integrator.x == pytest.approx((vx * math.cos(th) - vy * math.sin(th)) * 1.0)
    assert core.integrator.y == pytest.approx((vx * math.sin(th) + vy * math.cos(th)) * 1.0)


def test_odometry_record_carries_pose_twist_quaternion_and_stamps() -> None:
    core = BaseNodeCore(now=0.0)
    core.receive(odom_frame.encode(OdomFrame(0.25, -0.5, 0.75, 90.0)), now=1.0)
    (rec,) = core.receive(odom_frame.encode(OdomFrame(0.25, -0.5, 0.75, 90.0)), now=1.5)
    assert (rec.stamp, rec.dt) == (1.5, 0.5)
    assert rec.yaw == pytest.approx(math.pi / 2)
    assert rec.orientation == pytest.approx((0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)))
    assert (rec.vx, rec.vy, rec.wz) == (0.25, -0.5, 0.75)
    assert rec.x == pytest.approx(0.25) and rec.y == pytest.approx(0.125)  # rotated by 90 deg
    d = rec.as_dict()
    assert d["pose"]["orientation"]["w"] == pytest.approx(math.sqrt(0.5))
    assert d["twist"]["angular"]["z"] == 0.75 and d["frame_id"] == "odom"


def test_quaternion_from_yaw_is_unit_and_round_trips() -> None:
    for yaw in (-3.0, -1.0, 0.0, 0.5, 3.1):
        qx, qy, qz, qw = quaternion_from_yaw(yaw)
        assert qx == qy == 0.0
        assert qz * qz + qw * qw == pytest.approx(1.0)
        assert 2 * math.atan2(qz, qw) == pytest.approx(yaw)


def test_frames_split_across_reads_integrate_like_whole_frames() -> None:
    rnd = random.Random(4)
    frames = [OdomFrame(0.3, 0.0, 0.2, float(k)) for k in range(50)]
    whole = BaseNodeCore(now=0.0)
    split = BaseNodeCore(now=0.0)
    for k, f in enumerate(frames):
        data = odom_frame.encode(f)
        whole.receive(data, now=k * 0.01)
        cut = sorted(rnd.sample(range(1, len(data)), 3))
        parts = [data[i:j] for i, j in zip([0, *cut], [*cut, len(data)])]
        got = [rec for part in parts for rec in split.receive(part, now=k * 0.01)]
        assert len(got) == 1  # the frame completes with its last part, not before
    assert (split.integrator.x, split.integrator.y) == (whole.integrator.x, whole.integrator.y)
    assert split.integrator.seq == 50


def test_nonfinite_frames_are_skipped_not_integrated() -> None:
    core = BaseNodeCore(now=0.0)
    core.receive(odom_frame.encode(OdomFrame(1.0, 0, 0, 0)), now=0.0)
    bad = odom_frame.encode(OdomFrame(math.nan, 0, 0, 0), allow_nonfinite=True)
    assert core.receive(bad, now=0.5) == []
    (rec,) = core.receive(odom_frame.encode(OdomFrame(1.0, 0, 0, 0)), now=1.0)
    assert rec.x == pytest.approx(1.0)
    assert core.stats()["skipped_nonfinite"] == 1


def test_calibration_scales_velocities_and_offsets_yaw() -> None:
    integ = OdometryIntegrator(Calibration(vx_scale=2.0, yaw_offset_deg=90.0))
    integ.update(OdomFrame(0.5, 0, 0, 0.0), 0.0)
    rec = integ.update(OdomFrame(0.5, 0, 0, 0.0), 1.0)
    assert rec is not None
    assert rec.vx == 1.0 and rec.yaw == pytest.approx(math.pi / 2)
    assert (rec.x, rec.y) == pytest.approx((0.0, 1.0))


# -- commands and the watchdog ------------------------------------------------------
def test_watchdog_zeroes_the_command_exactly_at_cmd_timeout_and_says_so() -> None:
    core = BaseNodeCore(rate_hz=100, cmd_timeout=0.5, now=0.0)
    assert core.frame(0.0) == ZERO_FRAME  # nothing requested yet: zero, no alarm
    core.request(0.3, 0.1, -0.2, now=1.0)
    moving = cmd_frame.encode(cmd_frame.CmdFrame(0.3, 0.1, -0.2))
    assert core.frame(1.0) == moving
    assert core.frame(1.4999) == moving
    assert core.drain_events() == []
    assert core.frame(1.5) == ZERO_FRAME
    (event,) = core.drain_events()
    assert event.kind == "watchdog" and "zero velocity" in event.message and event.stamp == 1.5
    assert core.frame(3.0) == ZERO_FRAME and core.drain_events() == []  # said once
    core.request(0.1, 0, 0, now=3.1)
    assert [e.kind for e in core.drain_events()] == ["resumed"]
    assert core.frame(3.2) == cmd_frame.encode(cmd_frame.CmdFrame(0.1, 0, 0))
    assert core.watchdog_trips == 1


def test_watchdog_can_be_disabled() -> None:
    core = BaseNodeCore(cmd_timeout=0.5, watchdog=False, now=0.0)
    core.request(0.3, 0, 0, now=0.0)
    assert cmd_frame.decode(core.frame(100.0)).vx == pytest.approx(0.3)


def test_request_refuses_nonfinite_values() -> None:
    core = BaseNodeCore(now=0.0)
    with pytest.raises(ValueError, match="vx"):
        core.request(math.inf, 0, 0, now=0.0)


def test_schedule_is_periodic_and_skips_missed_ticks_instead_of_bursting() -> None:
    core = BaseNodeCore(rate_hz=50, now=0.0)
    assert core.next_deadline == 0.0
    core.tick(0.0)
    assert core.next_deadline == pytest.approx(0.02)
    core.tick(0.0201)  # a little late: stays on the 20 ms grid
    assert core.next_deadline == pytest.approx(0.04)
    core.tick(0.5)  # very late: next one period from now, no catch-up burst
    assert core.next_deadline == pytest.approx(0.52)


def test_restored_link_sends_zero_first_and_restarts_the_odometry_clock() -> None:
    core = BaseNodeCore(rate_hz=100, cmd_timeout=10.0, now=0.0)
    core.request(0.5, 0, 0, now=0.0)
    core.receive(odom_frame.encode(OdomFrame(1.0, 0, 0, 0)), now=0.0)
    core.receive(odom_frame.encode(OdomFrame(1.0, 0, 0, 0))[:7], now=0.1)  # a partial frame
    core.link_lost(0.2, "unplugged")
    first = core.link_restored(5.0, attempts=3)
    assert first == ZERO_FRAME
    assert core.next_deadline == pytest.approx(5.01)
    assert cmd_frame.decode(core.tick(5.01)).vx == pytest.approx(0.5)  # request still fresh
    (rec,) = core.receive(odom_frame.encode(OdomFrame(1.0, 0, 0, 0)), now=5.0)
    assert rec.dt == 0.0 and rec.x == pytest.approx(1.0 * 0.0)  # no jump over the outage
    kinds = [e.kind for e in core.drain_events()]
    assert kinds == ["link-lost", "link-restored"]


# -- health -------------------------------------------------------------------------
def test_only_garbage_for_the_timeout_suggests_a_wrong_baud_rate() -> None:
    rnd = random.Random(1)
    core = BaseNodeCore(garbage_timeout=3.0, port="/dev/ttyUSB0", baud=115200, now=0.0)
    corrupt = odom_frame.encode(OdomFrame(1.0, 2.0, 3.0, 4.0))[:-1] + b"\x00"
    noise = [b for b in range(256) if b != 0xAA]
    t = 0.0
    while t < 3.5:
        core.receive(bytes(rnd.choice(noise) for _ in range(40)) + corrupt, now=t)
        core.check(t)
        t += 0.1
    (event,) = core.drain_events()
    assert event.kind == "garbage"
    assert "wrong baud rate?" in event.message and "115200" in event.message
    assert "/dev/ttyUSB0" in event.message


def test_frames_among_noise_or_silence_are_not_garbage() -> None:
    watch = GarbageWatch(3.0, 0.0)
    assert all(watch.update(k, 19 * k + 500, 40, k * 0.1) is None for k in range(1, 100))
    idle = GarbageWatch(3.0, 0.0)
    assert idle.update(0, 0, 0, 10.0) is None
    burst = GarbageWatch(3.0, 0.0)
    burst.update(0, 200, 3, 0.5)  # a banner, then silence
    assert burst.update(0, 200, 3, 5.0) is None


def test_paced_skips_to_the_newest_once_over_budget() -> None:
    from fwbridge.bridge.node.base_core import paced

    t = [0.0]

    def clock() -> float:
        return t[0]

    got = []
    for record, skipped in paced(list(range(10)), 0.5, clock):
        got.append((record, skipped))
        t[0] += 0.2  # each subscriber call takes 0.2 s
    # 0, 1, 2 fit (0.6 s have passed after the third), then straight to 9: 6 skipped.
    assert got == [(0, 0), (1, 0), (2, 0), (9, 6)]
    assert list(paced([], 1.0, clock)) == []
    assert list(paced(["a", "b"], 10.0, clock)) == [("a", 0), ("b", 0)]


def test_a_new_cmd_timeout_takes_effect_at_once_on_the_request_there() -> None:
    """set_cmd_timeout on a running core: the request already there trips once it is the
    new timeout old (already older: at the next frame), on the node's clock; said once."""
    core = BaseNodeCore(rate_hz=100, cmd_timeout=0.5, now=0.0)
    core.request(0.3, 0, 0, now=1.0)
    moving = cmd_frame.encode(cmd_frame.CmdFrame(0.3, 0, 0))
    core.set_cmd_timeout(0.25, now=1.05)
    (event,) = core.drain_events()
    assert (event.kind, event.stamp) == ("watchdog-set", 1.05)
    assert event.message == "watchdog: cmd_timeout 0.5 s -> 0.25 s"
    assert core.frame(1.2499) == moving
    assert core.frame(1.25) == ZERO_FRAME  # 0.25 s after the request, not 0.5
    assert "cmd_timeout 0.25 s" in core.drain_events()[0].message
    core.request(0.3, 0, 0, now=2.0)
    core.set_cmd_timeout(5.0, now=2.1)
    assert core.frame(6.9999) == moving and core.frame(7.0) == ZERO_FRAME
    core.request(0.3, 0, 0, now=8.0)
    core.set_cmd_timeout(0.05, now=8.3)  # the request is older than the new timeout already
    assert core.frame(8.3) == ZERO_FRAME
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="cmd_timeout"):
            core.set_cmd_timeout(bad, now=9.0)
    assert core.cmd_timeout == 0.05


def test_a_request_that_changes_the_command_goes_out_at_once_at_most_twice_a_period() -> None:
    core = BaseNodeCore(rate_hz=50, now=0.0)  # period 20 ms
    core.tick(0.0)
    core.request(0.2, 0, 0, now=0.001)
    assert core.prompt(0.001)  # a new command: now, not at 20 ms
    core.frame(0.001)
    core.request(0.2, 0, 0, now=0.005)
    assert not core.prompt(0.005)  # the same command again: the schedule renews it
    core.request(0.3, 0, 0, now=0.006)
    assert not core.prompt(0.006)  # 5 ms after the last early one: waits (10 ms apart)
    assert core.prompt(0.012)  # still a change, and half a period later: now
    core.frame(0.012)
    core.request(0.0, 0, 0, now=0.030)
    assert core.prompt(0.030)  # a stop goes out at once too
    assert core.frame(0.030) == ZERO_FRAME
