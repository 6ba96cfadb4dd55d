"""The SCARA arm: kinematics, motion profiles and the pick-and-place task."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.robots.arm.can_arm import (
        ArmLink as ArmLink,
    )
    from fwbridge.bridge.robots.arm.can_arm import (
        run_pick_place as run_pick_place,
    )
    from fwbridge.bridge.robots.arm.config import (
        ArmConfigError as ArmConfigError,
    )
    from fwbridge.bridge.robots.arm.config import (
        load_arm_config as load_arm_config,
    )
    from fwbridge.bridge.robots.arm.config import (
        parse_arm as parse_arm,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        Joints as Joints,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        Pose as Pose,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        ScaraGeometry as ScaraGeometry,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        UnreachableError as UnreachableError,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        forward as forward,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        inverse as inverse,
    )
    from fwbridge.bridge.robots.arm.kinematics import (
        inverse_path as inverse_path,
    )
    from fwbridge.bridge.robots.arm.motion import (
        JointMove as JointMove,
    )
    from fwbridge.bridge.robots.arm.motion import (
        Limits as Limits,
    )
    from fwbridge.bridge.robots.arm.motion import (
        LinearMove as LinearMove,
    )
    from fwbridge.bridge.robots.arm.pick_place import (
        PickAndPlace as PickAndPlace,
    )
    from fwbridge.bridge.robots.arm.pick_place import (
        PickPlaceConfig as PickPlaceConfig,
    )
    from fwbridge.bridge.robots.arm.pick_place import (
        SafeZViolation as SafeZViolation,
    )


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "ArmLink": "fwbridge.bridge.robots.arm.can_arm",
    "run_pick_place": "fwbridge.bridge.robots.arm.can_arm",
    "ArmConfigError": "fwbridge.bridge.robots.arm.config",
    "load_arm_config": "fwbridge.bridge.robots.arm.config",
    "parse_arm": "fwbridge.bridge.robots.arm.config",
    "Joints": "fwbridge.bridge.robots.arm.kinematics",
    "Pose": "fwbridge.bridge.robots.arm.kinematics",
    "ScaraGeometry": "fwbridge.bridge.robots.arm.kinematics",
    "UnreachableError": "fwbridge.bridge.robots.arm.kinematics",
    "forward": "fwbridge.bridge.robots.arm.kinematics",
    "inverse": "fwbridge.bridge.robots.arm.kinematics",
    "inverse_path": "fwbridge.bridge.robots.arm.kinematics",
    "JointMove": "fwbridge.bridge.robots.arm.motion",
    "Limits": "fwbridge.bridge.robots.arm.motion",
    "LinearMove": "fwbridge.bridge.robots.arm.motion",
    "PickAndPlace": "fwbridge.bridge.robots.arm.pick_place",
    "PickPlaceConfig": "fwbridge.bridge.robots.arm.pick_place",
    "SafeZViolation": "fwbridge.bridge.robots.arm.pick_place",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
