"""No floor reaches up by a name: the engine makes the built-in codecs itself, and the
link floor serves ``sim://`` only once the simulated firmware registered it.

Each check runs in a fresh interpreter: this one's ``sys.modules`` holds everything
the other tests imported (and registered).
"""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_engine_makes_the_built_in_codecs_without_the_frame_modules() -> None:
    out = run(
        "import sys\n"
        "from fwbridge.protocols.descriptions.builtin import builtin\n"
        "from fwbridge.protocols.engine import codec_for\n"
        "odom, cmd = codec_for(builtin('odom')), codec_for(builtin('cmd'))\n"
        "print(sorted(m for m in sys.modules if m.endswith(('odom_frame', 'cmd_frame'))))\n"
        "print(odom.cls.__name__, odom.decode(odom.encode(odom.cls(1, 2, 3, 180))).yaw_rad)\n"
        "from fwbridge.protocols import cmd_frame, odom_frame\n"
        "print(odom_frame.CODEC is odom, cmd_frame.CODEC is cmd, cmd.cls() == cmd_frame.ZERO)\n")
    assert out.splitlines() == ["[]", "OdomFrame 3.141592653589793", "True True True"]


def test_sim_urls_are_served_only_once_the_simulated_firmware_registers_them() -> None:
    out = run(
        "import sys, serial\n"
        "from fwbridge.bridge.link.transports import LinkURLError, open_link\n"
        "from fwbridge.bridge.link.transports import register_url_handlers\n"
        "register_url_handlers()\n"
        "try:\n"
        "    open_link('sim://echo?pacing=afap')\n"
        "except LinkURLError as exc:\n"
        "    print('refused:', exc)\n"
        "try:\n"
        "    serial.serial_for_url('sim://echo?pacing=afap')\n"
        "except ValueError as exc:\n"
        "    print('pyserial:', exc)\n"
        "print(sorted(m for m in sys.modules if m.startswith('fwbridge.bridge.sim')))\n"
        "import fwbridge.bridge.sim\n"
        "from fwbridge.bridge.link.link_urls import URL_HANDLERS\n"
        "print('after import:', URL_HANDLERS)\n"
        "fwbridge.bridge.sim.register()\n"
        "with open_link('sim://echo?pacing=afap') as port:\n"
        "    port.write(b'ab'); print(port.read(2))\n"
        "with serial.serial_for_url('sim://echo?pacing=afap', timeout=1) as port:\n"
        "    port.write(b'cd'); print(port.read(2))\n")
    assert out.splitlines() == [
        "refused: 'sim://' URLs are not offered by this program (the simulated firmware: "
        "fwbridge.bridge.sim.register() offers it)",
        "pyserial: invalid URL, protocol 'sim' not known",
        "[]",
        "after import: {}",
        "b'ab'",
        "b'cd'",
    ]


def test_the_command_offers_sim_urls() -> None:
    out = run(
        "from click.testing import CliRunner\n"
        "from fwbridge.cli import fwbridge\n"
        "res = CliRunner().invoke(fwbridge, ['sniff', 'sim://mecanum?pacing=afap', '-p', 'odom',"
        " '--duration', '0.2', '--json'])\n"
        "print(res.exit_code, res.output.count('\"vx\"') > 0)\n")
    assert out.split() == ["0", "True"]
