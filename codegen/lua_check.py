"""Does a generated dissector load? Asked of tshark, before it replaces a working one.

``fwbridge wireshark install`` puts the plugin where Wireshark loads it at every
start: a plugin that does not load takes the built-in frames' dissection with it.
So the text is loaded first by tshark (when it is installed), alone (a private
home, so the plugin already installed is not loaded beside it), on an empty
capture; only a plugin that loads without a Lua error is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from fwbridge.protocols.errors import ConfigError
from fwbridge.protocols.pcapng import interface_description, section_header

__all__ = ["LuaDoesNotLoad", "check_plugin", "lua_loads"]

#: tshark starts in about a second; a loaded machine may take many.
TIMEOUT = 120.0


class LuaDoesNotLoad(ConfigError):
    """tshark refused the generated Lua: the plugin is not installed."""


def lua_loads(path: Path, tshark: str | None = None) -> str | None:
    """The first Lua error tshark reports loading ``path``, or None when it loads.

    None too when tshark is not installed (nothing to ask).
    """
    exe = tshark or shutil.which("tshark")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="fwbridge-lua-") as tmp:
        home = Path(tmp)
        capture = home / "empty.pcapng"
        capture.write_bytes(section_header() + interface_description(147, 65535))
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
        try:
            proc = subprocess.run([exe, "-X", f"lua_script:{path}", "-r", str(capture)],
                                  capture_output=True, text=True, timeout=TIMEOUT, env=env,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            return f"tshark did not finish loading it within {TIMEOUT:g} s"
        except OSError as exc:
            return f"tshark could not run: {exc.strerror or exc}"
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    for k, line in enumerate(lines):
        if "Lua:" in line:  # "Lua: Error during loading:" says where on the next line
            detail = lines[k + 1] if line.endswith(":") and k + 1 < len(lines) else ""
            return f"{line} {detail}".strip()
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"tshark exited {proc.returncode}"])[-1]
    return None


def check_plugin(text: str, done: str = "installed") -> None:
    """Raise :class:`LuaDoesNotLoad` when tshark (if installed) cannot load ``text``
    (``done``: what did not happen, for the error line)."""
    with tempfile.TemporaryDirectory(prefix="fwbridge-lua-") as tmp:
        path = Path(tmp) / "fwbridge.lua"
        path.write_text(text, encoding="utf-8")
        error = lua_loads(path)
    if error is not None:
        raise LuaDoesNotLoad(f"the generated dissector does not load in tshark ({error}); "
                             f"nothing was {done}")
