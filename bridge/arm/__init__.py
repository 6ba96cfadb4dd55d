"""The SCARA arm: kinematics, motion profiles and the pick-and-place task."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.arm.can_arm import (
        ArmLink as ArmLink,
    )
    from fwbridge.bridge.arm.can_arm import (
        run_pick_place as run_pick_place,
    )
    from fwbridge.bridge.arm.config import (
        ArmConfigError as ArmConfigError,
    )
    from fwbridge.bridge.arm.config import (
        load_arm_config as load_arm_config,
    )
    from fwbridge.bridge.arm.config import (
        parse_arm as parse_arm,
    )
    from fwbridge.bridge.arm.kinematics import (
        Joints as Joints,
    )
    from fwbridge.bridge.arm.kinematics import (
        Pose as Pose,
    )
    from fwbridge.bridge.arm.kinematics import (
        ScaraGeometry as ScaraGeometry,
    )
    from fwbridge.bridge.arm.kinematics import (
        UnreachableError as UnreachableError,
    )
    from fwbridge.bridge.arm.kinematics import (
        forward as forward,
    )
    from fwbridge.bridge.arm.kinematics import (
        inverse as inverse,
    )
    from fwbridge.bridge.arm.kinematics import (
        inverse_path as inverse_path,
    )
    from fwbridge.bridge.arm.motion import (
        JointMove as JointMove,
    )
    from fwbridge.bridge.arm.motion import (
        Limits as Limits,
    )
    from fwbridge.bridge.arm.motion import (
        LinearMove as LinearMove,
    )
    from fwbridge.bridge.arm.pick_place import (
        PickAndPlace as PickAndPlace,
    )
    from fwbridge.bridge.arm.pick_place import (
        PickPlaceConfig as PickPlaceConfig,
    )
    from fwbridge.bridge.arm.pick_place import (
        SafeZViolation as SafeZViolation,
    )

__all__ = [
    "ArmConfigError",
    "ArmLink",
    "JointMove",
    "Joints",
    "Limits",
    "LinearMove",
    "PickAndPlace",
    "PickPlaceConfig",
    "Pose",
    "SafeZViolation",
    "ScaraGeometry",
    "UnreachableError",
    "forward",
    "inverse",
    "inverse_path",
    "load_arm_config",
    "parse_arm",
    "run_pick_place",
]

#: Public name -> the module that defines it (loaded on first use).
_EXPORTS = {
    "Joints": "fwbridge.bridge.arm.kinematics",
    "Pose": "fwbridge.bridge.arm.kinematics",
    "ScaraGeometry": "fwbridge.bridge.arm.kinematics",
    "UnreachableError": "fwbridge.bridge.arm.kinematics",
    "forward": "fwbridge.bridge.arm.kinematics",
    "inverse": "fwbridge.bridge.arm.kinematics",
    "inverse_path": "fwbridge.bridge.arm.kinematics",
    "JointMove": "fwbridge.bridge.arm.motion",
    "Limits": "fwbridge.bridge.arm.motion",
    "LinearMove": "fwbridge.bridge.arm.motion",
    "PickAndPlace": "fwbridge.bridge.arm.pick_place",
    "PickPlaceConfig": "fwbridge.bridge.arm.pick_place",
    "SafeZViolation": "fwbridge.bridge.arm.pick_place",
    "ArmConfigError": "fwbridge.bridge.arm.config",
    "load_arm_config": "fwbridge.bridge.arm.config",
    "parse_arm": "fwbridge.bridge.arm.config",
    "ArmLink": "fwbridge.bridge.arm.can_arm",
    "run_pick_place": "fwbridge.bridge.arm.can_arm",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
