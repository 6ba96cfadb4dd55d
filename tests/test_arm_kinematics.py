"""SCARA kinematics: FK(IK(p)) == p, nearest-solution continuity, unreachable targets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.baselines.seed_scara_ik import compute_scara_ik
from fwbridge.bridge.robots.arm.kinematics import (
    Joints,
    Pose,
    ScaraGeometry,
    UnreachableError,
    forward,
    inverse,
    inverse_all,
    inverse_path,
    joint_distance,
    normalize_angle,
)

GEOM = ScaraGeometry()
angles = st.floats(-math.pi, math.pi)


@st.composite
def reachable_poses(draw: st.DrawFn) -> Pose:
    """Poses made by FK from joints within the limits: reachable by construction.

    Kept 1 µrad inside the limits (the IK of a pose made exactly at a limit may
    land a rounding error outside it), and |theta2| >= 1 mrad: a straight arm
    sits on the workspace's outer edge, where rounding decides reachability.
    """
    m = 1e-6
    elbow = draw(st.floats(1e-3, GEOM.limit2 - m)) * draw(st.sampled_from([-1.0, 1.0]))
    j = Joints(
        draw(st.floats(-GEOM.limit1 + m, GEOM.limit1 - m)),
        elbow,
        draw(st.floats(GEOM.z_min, GEOM.z_max)),
        draw(st.floats(-math.pi, math.pi)),
    )
    return forward(GEOM, j)


@given(reachable_poses(), angles, angles)
def test_forward_of_inverse_is_identity(pose: Pose, c1: float, c2: float) -> None:
    j = inverse(GEOM, pose, Joints(c1, c2, 0.0, 0.0))
    back = forward(GEOM, j)
    assert back.distance(pose) < 1e-9
    assert abs(normalize_angle(back.phi - pose.phi)) < 1e-9
    assert GEOM.within_limits(j)


@given(reachable_poses(), angles, angles)
def test_nearest_solution_uses_plain_differences(pose: Pose, c1: float, c2: float) -> None:
    current = Joints(c1, c2, 0.0, 0.0)
    chosen = inverse(GEOM, pose, current)

    def dist(j: Joints) -> float:
        return abs(j.theta1 - c1) + abs(j.theta2 - c2)

    assert all(dist(chosen) <= dist(j) + 1e-12 for j in inverse_all(GEOM, pose))


def test_no_travel_across_pi() -> None:
    """A joint at +179 deg cannot pass the +-180 deg stop: a candidate at -179 deg is
    358 deg of travel away, so the other elbow is chosen, as the seed's rule does."""
    geom = ScaraGeometry(limit1=math.pi, limit2=math.pi)
    current = Joints(math.radians(179.0), 0.0, 0.1, 0.0)
    target = forward(geom, Joints(math.radians(-179.0), 0.3, 0.1, 0.0))
    j = inverse(geom, target, current)
    seed = compute_scara_ik(target.x, target.y, 0.1, 0.0, current.theta1, 0.0, 0.0,
                            -math.pi, math.pi, -math.pi, math.pi)
    assert seed.valid and seed.theta2 == pytest.approx(-0.3)
    assert j.theta2 == pytest.approx(seed.theta2) and j.theta1 == pytest.approx(seed.theta1)


@given(st.floats(-2, 2), st.floats(-2, 2), st.floats(-0.5, 1.0), angles)
def test_unreachable_is_reported_never_nan(x: float, y: float, z: float, phi: float) -> None:
    pose = Pose(x, y, z, phi)
    try:
        j = inverse(GEOM, pose)
    except UnreachableError as exc:
        r = math.hypot(x, y)
        assert not (GEOM.r_min <= r <= GEOM.r_max and GEOM.z_min <= z <= GEOM.z_max) or (
            "limits" in str(exc)
        )
        return
    assert all(math.isfinite(v) for v in j)
    assert forward(GEOM, j).distance(pose) < 1e-9


@pytest.mark.parametrize(
    ("pose", "message"),
    [
        (Pose(1.2, 0.0, 0.1), "outside the workspace"),
        (Pose(0.05, 0.0, 0.1), "outside the workspace"),
        (Pose(0.0, 0.0, 0.1), "outside the workspace"),
        (Pose(0.5, 0.0, 0.9), "outside the slide's range"),
        (Pose(float("nan"), 0.0, 0.1), "not finite"),
        (Pose(0.5, 0.0, 0.1, float("inf")), "not finite"),
        (Pose(-0.94, 0.05, 0.1), "outside the limits"),  # behind the base: beyond +-170 deg
    ],
)
def test_unreachable_messages(pose: Pose, message: str) -> None:
    with pytest.raises(UnreachableError, match=message):
        inverse(GEOM, pose)


def test_link_lengths_come_from_config() -> None:
    geom = ScaraGeometry(l1=0.6, l2=0.4)
    j = inverse(geom, Pose(0.9, 0.2, 0.1))
    assert forward(geom, j).distance(Pose(0.9, 0.2, 0.1)) < 1e-12
    with pytest.raises(UnreachableError):
        inverse(GEOM, Pose(0.97, 0.0, 0.1))  # beyond 0.55 + 0.4


@given(st.lists(reachable_poses(), min_size=1, max_size=30), angles, angles)
def test_inverse_path_equals_point_by_point(poses: list[Pose], c1: float, c2: float) -> None:
    current = Joints(c1, c2, 0.0, 0.0)
    seq = []
    cur = current
    for p in poses:
        cur = inverse(GEOM, p, cur)
        seq.append(cur)
    batch = inverse_path(GEOM, np.array(poses), current)
    diff = batch - np.array(seq)
    # numpy's and libm's acos/atan2 may differ in the last bit: at the wrist's
    # +-pi boundary that is +pi on one side and -pi on the other, the same angle.
    diff[:, 3] = (diff[:, 3] + math.pi) % (2 * math.pi) - math.pi
    assert np.abs(diff).max() < 1e-9


def test_inverse_path_names_the_unreachable_point() -> None:
    poses = np.array([[0.5, 0.0, 0.1, 0.0], [1.5, 0.0, 0.1, 0.0]])
    with pytest.raises(UnreachableError, match="point 1"):
        inverse_path(GEOM, poses)


def test_nearest_solution_is_by_the_travel_the_joints_make() -> None:
    """Joints limited to +-2.967 rad cannot wrap: -2.80 to +1.56 is 4.35 rad of travel,
    not the 1.93 a wrapped difference claims, so the other elbow is nearer."""
    current = Joints(-2.41003721208169, -2.7987860743184148, 0.1, 0.0)
    target = Pose(0.6715302078397394, -0.13446586418989326, 0.1, 0.0)
    chosen = inverse(GEOM, target, current)
    assert chosen.theta2 == pytest.approx(-1.5559460339899458)
    travel = [joint_distance(j, current) for j in inverse_all(GEOM, target)]
    assert joint_distance(chosen, current) == pytest.approx(min(travel))
    path = inverse_path(GEOM, np.array([[*target]]), current)
    assert path[0, 1] == pytest.approx(chosen.theta2)


@pytest.mark.parametrize("angle", [math.inf, -math.inf, math.nan, 1e300, -8e9])
def test_normalize_angle_takes_every_float_without_raising(angle: float) -> None:
    # A feedback frame with a non-finite angle must not raise out of the arm's loop: its
    # wrap is NaN (never "reached"), a finite one of any size lands in (-pi, pi].
    a = normalize_angle(angle)
    if math.isfinite(angle):
        assert -math.pi < a <= math.pi
    else:
        assert math.isnan(a)
