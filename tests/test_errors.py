"""One error root: every exception fwbridge raises on purpose is a fwbridge.Error."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import fwbridge
from fwbridge.protocols import errors
from tests.layout import package_modules

#: Raised on purpose but not ours to root: protocol contracts of other libraries
#: (pyserial's port-state errors, as a URL handler must raise them), Python's
#: own signals, and abstract methods.
FOREIGN = {"PortNotOpenError", "SerialTimeoutException", "NotImplementedError", "SystemExit",
           "KeyboardInterrupt", "StopIteration",
           "Stopped",  # a stop signal: a KeyboardInterrupt, so no `except Exception` eats it
           "AttributeError",  # a module __getattr__ must raise AttributeError
           "KeyError",  # a dict's __missing__ must raise KeyError
           "ImportError"}  # a folder imported under a second name fails as an import does


def modules() -> list[str]:
    # From pyproject's layout: in an editable install fwbridge.__path__ is fwbridge/ alone.
    return list(package_modules())


def raised_classes(module_name: str) -> list[tuple[str, int, object]]:
    module = importlib.import_module(module_name)
    source = Path(module.__file__ or "").read_text()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else None
            if name is None or name in FOREIGN:
                continue
            value = getattr(module, name, None) or getattr(builtins, name, None)
            if isinstance(value, type) and issubclass(value, BaseException):
                out.append((name, node.lineno, value))
    return out


def test_every_deliberate_raise_derives_from_the_root() -> None:
    offenders = []
    for name in modules():
        for cls_name, line, cls in raised_classes(name):
            assert isinstance(cls, type)
            if not issubclass(cls, fwbridge.Error):
                offenders.append(f"{name}:{line}: raise {cls_name}")
    assert offenders == []


def test_the_subtrees_keep_the_bases_callers_rely_on() -> None:
    assert issubclass(errors.FrameError, ValueError) and issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.CaptureError, ValueError)
    assert issubclass(errors.StateError, RuntimeError)
    assert issubclass(errors.LifecycleError, RuntimeError)
    import can
    import serial

    from fwbridge.bridge.link.transports import PortError
    from fwbridge.can_bus.simchannel import SimBusError

    assert issubclass(SimBusError, can.CanOperationError)
    assert issubclass(SimBusError, fwbridge.Error)
    assert issubclass(PortError, serial.SerialException) and issubclass(PortError, fwbridge.Error)
    # One ConfigError, wherever it is imported from.
    from fwbridge.bridge.node.config import ConfigError

    assert ConfigError is fwbridge.ConfigError is errors.ConfigError
