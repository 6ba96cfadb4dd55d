"""The ros2_control hardware lifecycle (seed 003), on a serial link.

::

    unconfigured --configure--> inactive --activate--> active
    active --deactivate--> inactive --cleanup--> unconfigured
    any --shutdown--> finalized
    a failing transition --> error-processing --on_error--> unconfigured | finalized

- configure: open the link (the config's URL: the real port, or the
  simulated endpoint when ``use_sim``), load the calibration file if any;
- activate: enable, send the reset state (for a mobile base: zero velocity);
- read()/write(): only while active, at the control rate (:meth:`LinkHardware.send`
  raises :class:`LifecycleError` in any other state);
- deactivate: safe stop (zero velocity), link stays open;
- cleanup: close the link;
- shutdown: deactivate and cleanup as needed, then release the link whatever
  failed on the way; a failure is raised after the release.

An illegal transition raises :class:`LifecycleError` naming the state and
what to do first. As in ros2_control, a hook that raises sends the hardware
to ERROR_PROCESSING, where :meth:`HardwareInterface.on_error` decides:
True (the default, after releasing what it holds) -> UNCONFIGURED, False ->
FINALIZED; the hook's exception is then raised.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable
from typing import Any

import serial

from fwbridge.bridge.link.transports import IO_ERRORS, LinkError, LinkLost, open_link, writer_for
from fwbridge.bridge.node.config import Calibration, RobotConfig, load_calibration
from fwbridge.protocols.errors import LifecycleError

__all__ = [
    "Calibration",
    "HardwareInterface",
    "LifecycleError",
    "LifecycleState",
    "LinkHardware",
    "load_calibration",
]


class LifecycleState(enum.Enum):
    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"
    FINALIZED = "finalized"
    ERROR_PROCESSING = "error-processing"  # only while on_error runs


_S = LifecycleState
# transition -> (from, to, what to do instead when the state is wrong)
_TRANSITIONS: dict[str, tuple[LifecycleState, LifecycleState]] = {
    "configure": (_S.UNCONFIGURED, _S.INACTIVE),
    "activate": (_S.INACTIVE, _S.ACTIVE),
    "deactivate": (_S.ACTIVE, _S.INACTIVE),
    "cleanup": (_S.INACTIVE, _S.UNCONFIGURED),
}
_NEXT_STEP = {
    _S.UNCONFIGURED: "configure first",
    _S.INACTIVE: "activate first, or cleanup",
    _S.ACTIVE: "deactivate first",
    _S.FINALIZED: "it was shut down; make a new one",
    _S.ERROR_PROCESSING: "a transition is failing; wait for on_error",
}


class HardwareInterface:
    """The lifecycle state machine; subclasses fill in the ``on_*`` hooks.

    Transitions are serialised by a lock, so a control thread and a
    supervisor can both call them safely.
    """

    def __init__(self) -> None:
        self._state = LifecycleState.UNCONFIGURED
        self._lock = threading.RLock()
        self._transitioning: str | None = None  # the transition whose hook is running

    @property
    def state(self) -> LifecycleState:
        return self._state

    def _transition(self, name: str, hook: Callable[[], None]) -> None:
        src, dst = _TRANSITIONS[name]
        with self._lock:
            if self._state is not src:
                raise LifecycleError(
                    f"cannot {name}: hardware is {self._state.value} ({_NEXT_STEP[self._state]})"
                )
            self._transitioning = name
            try:
                hook()
            except BaseException as exc:
                self._error(name, exc)
                raise
            finally:
                self._transitioning = None
            self._state = dst

    def _error(self, name: str, exc: BaseException) -> None:
        """ErrorProcessing: ``on_error`` picks UNCONFIGURED (True) or FINALIZED."""
        self._state = LifecycleState.ERROR_PROCESSING
        try:
            recovered = self.on_error(name, exc)
        except Exception:
            recovered = False
        if not recovered:
            with contextlib.suppress(Exception):
                self.on_shutdown()
        self._state = LifecycleState.UNCONFIGURED if recovered else LifecycleState.FINALIZED

    def configure(self) -> None:
        self._transition("configure", self.on_configure)

    def activate(self) -> None:
        self._transition("activate", self.on_activate)

    def deactivate(self) -> None:
        self._transition("deactivate", self.on_deactivate)

    def cleanup(self) -> None:
        self._transition("cleanup", self.on_cleanup)

    def shutdown(self) -> None:
        """From any state to finalized, passing through deactivate and cleanup.

        Resources are released (:meth:`on_shutdown`) even when deactivate or
        cleanup fails; that failure is raised afterwards.
        """
        with self._lock:
            if self._state is LifecycleState.FINALIZED:
                return
            try:
                if self._state is LifecycleState.ACTIVE:
                    self.deactivate()
                if self._state is LifecycleState.INACTIVE:
                    self.cleanup()
            finally:
                try:
                    self.on_shutdown()
                finally:
                    self._state = LifecycleState.FINALIZED

    def require_active(self, what: str) -> None:
        if self._state is not LifecycleState.ACTIVE:
            raise LifecycleError(
                f"cannot {what}: hardware is {self._state.value} (only while active)"
            )

    def __enter__(self) -> HardwareInterface:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- hooks ------------------------------------------------------------------
    def on_configure(self) -> None:
        """Open resources (port, calibration)."""

    def on_activate(self) -> None:
        """Enable outputs and go to the reset state."""

    def on_deactivate(self) -> None:
        """Safe stop."""

    def on_cleanup(self) -> None:
        """Release resources."""

    def on_shutdown(self) -> None:
        """Release whatever is still held; runs on every shutdown, so it must be idempotent."""

    def on_error(self, transition: str, exc: BaseException) -> bool:
        """A transition's hook raised ``exc``: release what it holds.

        True: recovered, go to UNCONFIGURED; False: go to FINALIZED.
        """
        return True


# -- a link-backed hardware interface -----------------------------------------------
class LinkHardware(HardwareInterface):
    """Hardware on one serial link chosen by a :class:`RobotConfig`.

    ``reset_frame``/``safe_stop_frame`` are the bytes sent on activate and
    deactivate. Writes go through :meth:`send`, which a runtime may redirect
    (the asyncio runtime sends through its transport); ``opener`` replaces
    :func:`open_link` (same signature), e.g. to wrap links.
    """

    def __init__(
        self,
        config: RobotConfig,
        *,
        reset_frame: bytes = b"",
        safe_stop_frame: bytes = b"",
        opener: Callable[..., serial.SerialBase] = open_link,
    ) -> None:
        super().__init__()
        self.config = config
        self.reset_frame = reset_frame
        self.safe_stop_frame = safe_stop_frame
        self.calibration = Calibration()
        self._opener = opener
        self._link: serial.SerialBase | None = None
        self._sender: Callable[[bytes], Any] | None = None
        self._write: Callable[[bytes], Any] | None = None
        #: Called with ("tx", bytes) for every write, e.g. a capture's ``write``.
        self.tap: Callable[[str, bytes], None] | None = None

    @property
    def link(self) -> serial.SerialBase:
        if self._link is None:
            raise LifecycleError(f"no link: hardware is {self.state.value} (configure first)")
        return self._link

    @property
    def connected(self) -> bool:
        return self._link is not None

    def open(self) -> serial.SerialBase:
        """Open the config's link (real or simulated); :class:`LinkError` on failure."""
        cfg = self.config
        link = self._opener(
            cfg.link_url, cfg.baud, exclusive=cfg.exclusive
        )
        self._link, self._write, self._sender = link, writer_for(link), None
        return link

    def close(self) -> None:
        """Close the link, tolerating one that is already gone."""
        link, self._link, self._sender = self._link, None, None
        self._write = None
        if link is not None:
            # A vanished device cannot be closed cleanly; its descriptor is released anyway.
            with contextlib.suppress(*IO_ERRORS):
                link.close()

    def reopen(self) -> serial.SerialBase:
        """After the link was lost: close what is left and open again."""
        self.close()
        return self.open()

    def redirect(self, sender: Callable[[bytes], Any] | None) -> None:
        """Send through ``sender`` instead of ``link.write`` (None: back to the link)."""
        self._sender = sender

    def send(self, data: bytes) -> None:
        """Write ``data`` while active; :class:`LinkLost` if the device went away.

        :class:`LifecycleError` in any other state: nothing reaches the
        device unless the hardware was activated (the reset and safe-stop
        frames of activate/deactivate take :meth:`_send_in_transition`).
        """
        self.require_active("send")
        self._write_frame(data)

    def _send_in_transition(self, data: bytes) -> None:
        """Write during the activate/deactivate transitions (reset state, safe stop)."""
        if self._transitioning not in ("activate", "deactivate"):
            raise LifecycleError(f"cannot send: hardware is {self.state.value} "
                                 "(only while active)")
        self._write_frame(data)

    def _write_frame(self, data: bytes) -> None:
        try:
            if self._sender is not None:
                self._sender(data)
            elif self._write is not None:
                self._write(data)
            else:
                self.link.write(data)  # not configured: raises the lifecycle error
        except IO_ERRORS as exc:
            raise LinkLost(f"{self.config.link_url}: write failed: {exc}") from exc
        if self.tap is not None:
            self.tap("tx", data)

    def on_configure(self) -> None:
        if self.config.calibration is not None:
            self.calibration = load_calibration(self.config.calibration)
        self.open()

    def on_activate(self) -> None:
        if self.reset_frame:
            self._send_in_transition(self.reset_frame)

    def on_deactivate(self) -> None:
        # A lost link cannot take the safe-stop frame; deactivating must still succeed.
        if self.safe_stop_frame and self.connected:
            with contextlib.suppress(LinkError):
                self._send_in_transition(self.safe_stop_frame)

    def on_cleanup(self) -> None:
        self.close()

    def on_shutdown(self) -> None:
        self.close()

    def on_error(self, transition: str, exc: BaseException) -> bool:
        self.close()  # a half-configured or failing link is released; configure again
        return True
