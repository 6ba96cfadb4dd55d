"""The fish's query results (0x11-0x14): what its main controller reports.

A mixin of :class:`~fwbridge.bridge.sim.models.fish.RobotFish` (layouts in
:mod:`fwbridge.protocols.families.fish_payloads`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fwbridge.can_bus.modeltypes import ErrorState
from fwbridge.protocols.action_frame import SubCommand
from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.families.fish_payloads import (
    FISH_SERVOS,
    BuoyancyInfo,
    CanErrorInfo,
    CanNodeInfo,
    Health,
    Result,
    RobotInfo,
    ServoInfo,
    action_code,
    decode_module_ids,
)

if TYPE_CHECKING:
    from fwbridge.bridge.sim.fish.body import FishBody
    from fwbridge.bridge.sim.fish.controller import FishController
    from fwbridge.can_bus.interface import FwBridgeBus
    from fwbridge.can_bus.sim.nodes import ActuatorModule, MainController
    from fwbridge.protocols.families.arq import Responder

__all__ = ["FishQueries"]

_HEALTH = {"unknown": Health.UNKNOWN, "ok": Health.OK, "degraded": Health.DEGRADED,
           "silent": Health.SILENT}


def _u16(value: float) -> int:
    return int(min(max(round(value), 0), 0xFFFF))


class FishQueries:
    """The query results, from the fish's controller, body, CAN master and counters."""

    if TYPE_CHECKING:
        controller: FishController
        body: FishBody
        responder: Responder
        stats: Any
        modules: dict[int, ActuatorModule]
        master: MainController
        main_bus: FwBridgeBus
        node_modules: dict[int, int]

        @property
        def now(self) -> float: ...

    def result(self, sub: int, data: bytes = b"") -> Result:
        """What a query of ``sub`` (0x11..0x14) answers now."""
        if sub == SubCommand.QUERY_ROBOT_INFO:
            return self.robot_info()
        if sub == SubCommand.QUERY_SERVO_INFO:
            return self.servo_info(decode_module_ids(data))
        if sub == SubCommand.QUERY_BUOYANCY_INFO:
            return self.buoyancy_info()
        if sub == SubCommand.QUERY_CAN_ERROR_RATE:
            return self.can_error_info()
        raise ConfigError(f"0x{sub:02x} is not a query")

    def robot_info(self) -> RobotInfo:
        ctl, body, st = self.controller, self.body, self.responder.stats
        left, right = body.sonars()
        d = ctl.last_decision
        source = ("none", "scene", "avoid", "random", "idle").index(d.source) if d else 0
        return RobotInfo(
            mode=int(ctl.mode), running=int(ctl.running), servos=len(self.modules),
            stored_groups=len(ctl.groups), uptime_ms=round(self.now * 1000) & 0xFFFFFFFF,
            heading_cdeg=round(body.heading_rounded(2) * 100),
            depth_cm=_u16(body.depth * 100),
            sonar_left_mm=0xFFFF if math.isinf(left) else _u16(min(left * 1000, 0xFFFE)),
            sonar_right_mm=0xFFFF if math.isinf(right) else _u16(min(right * 1000, 0xFFFE)),
            decision_source=source, decision_action=action_code(d.action) if d else 0xFF,
            frames=self.stats.frames & 0xFFFF, duplicates=st.duplicates & 0xFFFF,
            naks=st.naks & 0xFFFF)

    def servo_info(self, ids: tuple[int, ...] = ()) -> tuple[ServoInfo, ...]:
        """IDs the fish does not have are left out; none asked: all seven."""
        roles = {s.module_id: s.role for s in FISH_SERVOS}
        out = []
        for k in ids or tuple(roles):
            if k not in roles:
                continue
            h = self.master.health[k]
            fb = h.feedback
            angle = fb.angle if fb else 0
            target = self.controller.target(k)
            out.append(ServoInfo(
                module_id=k, role=int(roles[k]), health=int(_HEALTH[h.status.value]),
                angle=angle, target=angle if target is None else target,
                speed=fb.speed if fb else 0, current=fb.current if fb else 0,
                fault=int(fb.fault) if fb else 0))
        return tuple(out)

    def buoyancy_info(self) -> BuoyancyInfo:
        b = self.body
        return BuoyancyInfo(fill_pct=round(b.fill * 100), pump=b.pump, depth_cm=_u16(b.depth * 100),
                            pressure_hpa=_u16(b.pressure_hpa),
                            water_in_ml=round(b.water_in_ml) & 0xFFFFFFFF,
                            water_out_ml=round(b.water_out_ml) & 0xFFFFFFFF)

    def can_error_info(self) -> CanErrorInfo:
        """From the simulator's counters. A real main controller knows its own; here
        every node answers as if each module reported its counters."""
        ch = self.main_bus.sim
        with ch.lock:
            st = ch.stats()
        frames, errors = st["frames"], st["error_frames"]
        nodes = sorted(
            (CanNodeInfo(self.node_modules.get(n["id"], 0xFF), int(ErrorState[n["state"]]),
                         min(n["tec"], 0xFFFF), min(n["rec"], 0xFFFF),
                         min(n["bus_offs"], 0xFFFF))
             for n in st["nodes"][:255]), key=lambda n: n.module_id)
        ppm = round(errors * 1_000_000 / (frames + errors)) if frames + errors else 0
        return CanErrorInfo(round(st["bus_time"] * 1000) & 0xFFFFFFFF, frames & 0xFFFFFFFF,
                            errors & 0xFFFFFFFF, ppm, tuple(nodes))
