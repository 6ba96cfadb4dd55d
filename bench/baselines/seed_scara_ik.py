"""Python transcription of seed 001's ``computeSCARAIK`` (C), line for line.

Kept as the IK benchmark's baseline. Its behaviour is the seed's: it checks
``cos_alpha`` only, compares raw (not normalised) angle differences, and
returns ``valid = 0`` with a printout when unreachable (printing omitted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LINK1_LEN = 0.55
LINK2_LEN = 0.4


@dataclass
class InverseKinematicsResult:
    theta1: float = 0.0
    theta2: float = 0.0
    d3: float = 0.0
    theta4: float = 0.0
    valid: int = 0


def normalize_angle(angle: float) -> float:
    while angle > math.pi:
        angle -= 2.0 * math.pi
    while angle < -math.pi:
        angle += 2.0 * math.pi
    return angle


def compute_scara_ik(
    x: float, y: float, z: float, phi: float,
    current1: float, current2: float, current4: float,
    min_angle1: float, max_angle1: float, min_angle2: float, max_angle2: float,
) -> InverseKinematicsResult:
    result = InverseKinematicsResult()
    result.valid = 0
    r = math.sqrt(x * x + y * y)
    cos_alpha = (LINK1_LEN * LINK1_LEN + LINK2_LEN * LINK2_LEN - r * r) / (
        2.0 * LINK1_LEN * LINK2_LEN
    )
    if cos_alpha < -1.0 or cos_alpha > 1.0:
        return result
    alpha = math.acos(cos_alpha)
    theta2_elbow_left = math.pi - alpha
    theta2_elbow_right = -(math.pi - alpha)
    beta = math.atan2(y, x)
    cos_gamma = (LINK1_LEN * LINK1_LEN + r * r - LINK2_LEN * LINK2_LEN) / (2.0 * LINK1_LEN * r)
    gamma = math.acos(cos_gamma)
    theta1_elbow_left = beta - gamma
    theta1_elbow_right = beta + gamma
    candidates = [
        [theta1_elbow_left, theta2_elbow_left],
        [theta1_elbow_right, theta2_elbow_right],
    ]
    best_diff = 1e10
    found = 0
    for i in range(2):
        t1 = normalize_angle(candidates[i][0])
        t2 = normalize_angle(candidates[i][1])
        if t1 < min_angle1 or t1 > max_angle1 or t2 < min_angle2 or t2 > max_angle2:
            continue
        diff = math.fabs(t1 - current1) + math.fabs(t2 - current2)
        if diff < best_diff:
            best_diff = diff
            result.theta1 = t1
            result.theta2 = t2
            found = 1
    if not found:
        return result
    result.d3 = z
    result.theta4 = normalize_angle(phi - result.theta1 - result.theta2)
    result.valid = 1
    return result
