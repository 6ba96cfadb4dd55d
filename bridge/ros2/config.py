"""The ``[ros2]`` table of a robot file: how the bridge node appears in ROS 2.

::

    [ros2]
    enabled = true                   # or `fwbridge bridge robot.toml --ros2`
    namespace = "/robot1"            # topics: /robot1/odom, /robot1/cmd_vel (and /tf)
    node_name = "base_bridge"
    domain_id = 0                    # default: $ROS_DOMAIN_ID, else 0
    distro = "jazzy"                 # "jazzy" (and later: RIHS01 type hashes) or "humble"
    connect = ["tcp/localhost:7447"] # Zenoh endpoints: the router (fwbridge ros2 router,
                                     # or rmw_zenoh's rmw_zenohd)
    listen = []                      # none: nothing listens unless you say so
    frame_prefix = "robot1/"         # TF frames robot1/odom -> robot1/base_link (default: none)
    urdf = "robot.urdf"              # optional, relative to this file: robot_description

    [ros2.topics]                    # rename any topic
    odom = "odom"
    cmd_vel = "cmd_vel"

``urdf`` names a file read when the robot file is, in the robot file's folder or
below it (no ``..``, ``~``, ``$`` or leading ``/``; no symbolic link on the way:
another file is named on the command line, ``fwbridge bridge --urdf PATH``): at
most :data:`MAX_URDF` bytes of UTF-8 text, else one error naming the setting
(nothing starts); its text is published latched on ``robot_description``.

No Zenoh import here: a robot file is checked without the ``ros2`` extra.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fwbridge.bridge.node.config import ConfigError
from fwbridge.bridge.rosmsg.cdr import DISTROS
from fwbridge.bridge.rosmsg.topics import TOPICS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["DEFAULT_CONNECT", "MAX_URDF", "Ros2Settings", "load_ros2", "parse_endpoints",
           "parse_ros2", "read_urdf"]

#: Where ROS 2 nodes look for the router (DEFAULT_RMW_ZENOH_SESSION_CONFIG.json5): the
#: port of rmw_zenohd, where ``fwbridge ros2 router`` listens too.
DEFAULT_CONNECT = ("tcp/localhost:7447",)
#: The largest URDF a robot file may name (bytes): robot descriptions with meshes by
#: reference are tens of kB; more is not a URDF this bridge should hold and publish.
MAX_URDF = 1 << 20
_ENDPOINT = re.compile(r"^(tcp|udp|tls|quic|ws|unixsock-stream)/[^\s]+$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOPIC = re.compile(r"^/?[A-Za-z_~][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
#: A TF frame prefix: names joined by "/", no leading "/" (tf2 refuses frame ids with one).
_FRAME_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*/?$")


@dataclass(frozen=True)
class Ros2Settings:
    """A parsed ``[ros2]`` table (defaults when the table is absent)."""

    enabled: bool = False
    namespace: str = "/"
    node_name: str = "base_bridge"
    domain_id: int | None = None  # None: $ROS_DOMAIN_ID, else 0
    distro: str = "jazzy"
    connect: tuple[str, ...] = DEFAULT_CONNECT
    listen: tuple[str, ...] = ()
    frame_prefix: str = ""  # "" or ending in "/": prefixes the odom and base_link frames
    topics: Mapping[str, str] = field(default_factory=dict)
    urdf: str = ""  # the URDF file's path, "" for none
    robot_description: str | None = field(default=None, repr=False, compare=False)  # its text

    @property
    def domain(self) -> int:
        """The ROS domain: the table's, else ``ROS_DOMAIN_ID``, else 0."""
        if self.domain_id is not None:
            return self.domain_id
        env = os.environ.get("ROS_DOMAIN_ID", "").strip()
        if not env:
            return 0
        if not env.isdigit() or int(env) > 232:
            raise ConfigError(f"ROS_DOMAIN_ID must be an integer 0..232, got {env!r}")
        return int(env)

    def topic(self, key: str) -> str:
        """The name of topic ``key`` (``odom``…): the table's override or the default."""
        return self.topics.get(key, TOPICS[key].name)

    def frame(self, name: str) -> str:
        """A TF frame's name with the prefix: ``odom`` -> ``robot1/odom``."""
        return self.frame_prefix + name

    @property
    def node_fqn(self) -> str:
        """The node's full name without the leading ``/``: ``robot1/base_bridge``
        (``base_bridge`` in the root namespace)."""
        ns = self.namespace.strip("/")
        return f"{ns}/{self.node_name}" if ns else self.node_name

    def with_namespace(self, namespace: str) -> Ros2Settings:
        return replace(self, namespace=_namespace("namespace", namespace))


def _frame_prefix(value: str) -> str:
    """``robot1`` or ``robot1/`` -> ``robot1/`` (the usual TF frame prefix); ``""`` stays."""
    return value if not value or value.endswith("/") else value + "/"


def _namespace(key: str, value: Any) -> str:
    if not isinstance(value, str) or not (value == "/" or _TOPIC.match(value)):
        raise _Bad(key, f"must be a ROS namespace like \"/robot1\", got {value!r}")
    return value if value.startswith("/") else "/" + value


def _endpoints(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Bad(key, f"must be a list of Zenoh endpoints like \"tcp/localhost:7447\", "
                   f"got {value!r}")
    for v in value:
        if not _ENDPOINT.match(v):
            raise _Bad(key, _not_endpoint(v))
    return tuple(value)


def _not_endpoint(value: str) -> str:
    return f"not a Zenoh endpoint: {value!r} (like \"tcp/192.168.1.10:7447\")"


def parse_endpoints(option: str, values: Sequence[str]) -> tuple[str, ...]:
    """Zenoh endpoints given on the command line as ``option`` (``--listen``), checked."""
    for v in values:
        if not _ENDPOINT.match(v):
            raise ConfigError(f"{option}: {_not_endpoint(v)}")
    return tuple(values)


class _Bad(ConfigError):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"ros2.{key}: {reason}")



def parse_ros2(table: Mapping[str, Any] | None, *, source: str = "<config>",
               base: Path | None = None) -> Ros2Settings:
    """:class:`Ros2Settings` from the parsed ``[ros2]`` table; errors name the key. A
    relative ``urdf`` is taken from ``base`` (the robot file's directory), else from the
    working directory."""
    values: dict[str, Any] = {}
    try:
        for key, value in (table or {}).items():
            if key == "enabled":
                if not isinstance(value, bool):
                    raise _Bad(key, f"must be true or false, got {value!r}")
                values[key] = value
            elif key == "namespace":
                values[key] = _namespace(key, value)
            elif key == "node_name":
                if not isinstance(value, str) or not _NAME.match(value):
                    raise _Bad(key, f"must be a ROS node name (letters, digits, _), "
                               f"got {value!r}")
                values[key] = value
            elif key == "domain_id":
                if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 232:
                    raise _Bad(key, f"must be an integer 0..232, got {value!r}")
                values[key] = value
            elif key == "distro":
                if value not in DISTROS:
                    raise _Bad(key, f"must be one of {', '.join(DISTROS)}, got {value!r}")
                values[key] = value
            elif key in ("connect", "listen"):
                values[key] = _endpoints(key, value)
            elif key == "frame_prefix":
                if not isinstance(value, str) or not (value == "" or _FRAME_PREFIX.match(value)):
                    raise _Bad(key, f"must be a TF frame prefix like \"robot1/\" (names of "
                               f"letters, digits and _, joined by /; no leading /), got {value!r}")
                values[key] = _frame_prefix(value)
            elif key == "topics":
                values[key] = _topics(value)
            elif key == "urdf":
                values["urdf"], values["robot_description"] = _urdf(value, base)
            else:
                known = ("connect, distro, domain_id, enabled, frame_prefix, listen, namespace, "
                         "node_name, topics, urdf")
                raise _Bad(key, f"unknown key (known here: {known})")
    except _Bad as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return Ros2Settings(**values)


def _topics(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Bad("topics", "must be a table of topic names")
    out = {}
    for key, name in value.items():
        if key not in TOPICS:
            raise _Bad(f"topics.{key}", f"unknown topic (known: {', '.join(sorted(TOPICS))})")
        if not isinstance(name, str) or not _TOPIC.match(name):
            raise _Bad(f"topics.{key}", f"must be a ROS topic name, got {name!r}")
        out[key] = name
    return out


def _urdf(value: Any, base: Path | None) -> tuple[str, str]:
    """The path and text of the URDF file ``value`` names: untrusted, so a file in the
    robot file's folder (``base``; else the working directory) or below it, reached
    without following a link, a regular file of at most :data:`MAX_URDF` bytes of UTF-8
    text, or an error saying which it is not."""
    if not isinstance(value, str) or not value.strip():
        raise _Bad("urdf", f"must be the path of a URDF file, got {value!r}")
    parts = value.strip().split("/")
    outside = (value.startswith(("/", "~")) or ".." in parts or "$" in value
               or "\x00" in value)
    if outside:
        raise _Bad("urdf", f"{value!r} is not a file in the robot file's folder: a robot "
                   "file names its URDF relative to itself, without '..', '~', '$' or a "
                   "leading '/' (give another path on the command line: --urdf PATH)")
    folder = base if base is not None else Path.cwd()
    names = [part for part in parts if part not in ("", ".")]
    path = folder.joinpath(*names)
    return str(path), read_urdf(path, folder=folder, parts=names)


def read_urdf(path: Path, *, folder: Path | None = None, parts: Sequence[str] = (),
              option: str | None = None) -> str:
    """The text of a URDF file, bounded and checked (see :func:`_urdf`); with ``folder``,
    ``parts`` are opened one by one from it, none of them a link (``O_NOFOLLOW``), so a
    file swapped for a link after a check is not followed either. Without, ``path`` is
    the user's own, given on the command line as ``option`` (the errors' name), and
    opened as it is."""

    def bad(reason: str) -> ConfigError:  # named after the option, or the table's key
        return ConfigError(f"{option}: {reason}") if option else _Bad("urdf", reason)

    def link(upto: int) -> ConfigError:
        return bad(f"{path}: {'/'.join(parts[:upto])} is a symbolic link: a robot file names "
                   "files in its folder, not links out of it (give the path on the command "
                   "line: --urdf PATH)")

    flags = os.O_RDONLY  # a FIFO never blocks (POSIX), no newline translation (Windows)
    for name in ("O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY"):
        flags |= getattr(os, name, 0)
    fd = -1
    try:
        if folder is None:
            fd = os.open(path, flags)
        elif os.open not in os.supports_dir_fd:  # Windows: no openat(), each part looked at
            for i in range(len(parts)):
                if os.path.islink(os.path.join(folder, *parts[:i + 1])):
                    raise link(i + 1)
            fd = os.open(path, flags)
        else:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    nxt = os.open(part, (flags if last else os.O_RDONLY | os.O_DIRECTORY
                                         | os.O_CLOEXEC) | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                            os.path.join(folder, *parts[:i + 1])):
                        raise link(i + 1) from None
                    raise
                os.close(fd)
                fd = nxt
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise bad(f"{path} is not a regular file")
        if info.st_size > MAX_URDF:
            raise bad(f"{path} is {info.st_size} bytes, more than {MAX_URDF}")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_URDF:
            chunk = os.read(fd, MAX_URDF + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise bad(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_URDF:  # it grew since fstat()
        raise bad(f"{path} is more than {MAX_URDF} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"{path} is not UTF-8 text (byte {exc.start} is "
                  f"0x{data[exc.start]:02x})") from None
    if "\x00" in text:
        raise bad(f"{path} is not text (a NUL character at {text.index(chr(0))})")
    if not text.strip():
        raise bad(f"{path} is empty")
    return text


def load_ros2(path: str | os.PathLike[str]) -> Ros2Settings:
    """The ``[ros2]`` table of a robot file (the file is otherwise read by load_config)."""
    from fwbridge.protocols.config_text import parse_toml, read_limited

    p = Path(path)
    try:
        with p.open("rb") as fh:  # bounded bytes and nesting: one error line
            data = parse_toml(read_limited(fh.read, str(p)).decode("utf-8"), str(p))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from None
    table = data.get("ros2")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{p}: ros2 must be a table ([ros2])")
    return parse_ros2(table, source=str(p), base=p.resolve().parent)
