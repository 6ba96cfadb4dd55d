"""rmw_zenoh's wire conventions, pure: key expressions, liveliness tokens, attachments.

As rmw_zenoh_cpp writes them (``docs/design.md``, ``liveliness_utils.cpp``,
``attachment_helpers.cpp``, ``qos.cpp``):

- data: ``<domain>/<topic without leading or trailing '/'>/<dds type>/<type hash>``,
  e.g. ``0/robot1/odom/nav_msgs::msg::dds_::Odometry_/RIHS01_…``; Humble's
  rmw_zenoh has no type hashes and writes ``TypeHashNotSupported``;
- liveliness: ``@ros2_lv/<domain>/<session zid>/<node id>/<entity id>/<kind>/
  <enclave>/<namespace>/<node name>[/<topic>/<dds type>/<type hash>/<qos>]``,
  kind ``NN`` (node), ``MP`` (publisher), ``MS`` (subscription); every ``/``
  inside a part becomes ``%`` (the root namespace and enclave ``/`` become ``%``);
- QoS: ``<reliability>:<durability>:<history>,<depth>:<deadline s>,<ns>:
  <lifespan s>,<ns>:<liveliness>,<lease s>,<ns>``, each value left empty when it
  equals rmw_zenoh's default (reliable, volatile, keep_last, depth 42, infinite
  durations, automatic liveliness); enum values are rmw/types.h's;
- attachment of every sample: int64 sequence number, int64 source timestamp
  (ns since the epoch), the 16-byte source GID, laid out by Zenoh's serializer:
  little-endian integers, the GID as a sequence (its length as a LEB128 varint,
  ``0x10``, then the bytes): 33 bytes. Earlier releases on Zenoh 1.x wrote each
  value after its name as a string (``"sequence_number"``, ``"source_timestamp"``,
  ``"source_gid"``, each length-prefixed as the GID): 77 bytes, the *keyed* layout;
  both are read, and an answer to a request goes back in the layout it came in;
- an entity's GID: XXH3-128 of its liveliness key, low 64 bits then high 64
  bits, each little endian.

No Zenoh import here: tests check these strings against golden fixtures.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from fwbridge.bridge.rosmsg.cdr import MessageError, dds_type_name, ros_type_name
from fwbridge.bridge.rosmsg.topics import Qos
from fwbridge.protocols.errors import ConfigError

__all__ = [
    "ADMIN_SPACE",
    "ATTACHMENT_SIZE",
    "Attachment",
    "Entity",
    "Freshness",
    "data_key",
    "demangle",
    "entity_gid",
    "liveliness_key",
    "mangle",
    "parse_liveliness",
    "parse_qos",
    "qos_key",
    "resolve_name",
]

ADMIN_SPACE = "@ros2_lv"
KINDS = {"NN": "node", "MP": "publisher", "MS": "subscription", "SS": "service",
         "SC": "client"}

# rmw/types.h enum values
_RELIABILITY = {"system_default": 0, "reliable": 1, "best_effort": 2}
_DURABILITY = {"system_default": 0, "transient_local": 1, "volatile": 2}
_HISTORY = {"system_default": 0, "keep_last": 1, "keep_all": 2}
#: rmw_zenoh's defaults (qos.cpp): values equal to these are left out of the key.
_DEFAULT = ("1", "2", "1", "42")


def mangle(name: str) -> str:
    """A name as one key chunk: every ``/`` becomes ``%``."""
    return name.replace("/", "%")


def demangle(chunk: str) -> str:
    return chunk.replace("%", "/")


def resolve_name(name: str, namespace: str) -> str:
    """A topic name made absolute in ``namespace`` (``odom`` in ``/robot1`` ->
    ``/robot1/odom``; ``/tf`` stays ``/tf``), as rcl expands it."""
    if name.startswith("/"):
        return name
    ns = namespace.rstrip("/")
    return f"{ns}/{name}"


def data_key(domain: int, topic: str, msgtype: str, type_hash: str) -> str:
    """The key expression samples of ``topic`` (absolute) are put on."""
    return f"{domain}/{topic.strip('/')}/{dds_type_name(msgtype)}/{type_hash}"


def qos_key(qos: Qos) -> str:
    """The QoS chunk of a liveliness token."""
    values = (str(_RELIABILITY[qos.reliability]), str(_DURABILITY[qos.durability]),
              str(_HISTORY[qos.history]), str(qos.depth))
    rel, dur, hist, depth = (v if v != d else "" for v, d in zip(values, _DEFAULT))
    return f"{rel}:{dur}:{hist},{depth}:,:,:,,"


def parse_qos(chunk: str) -> Qos | None:
    """The reliability, durability, history and depth of a token's QoS chunk (what
    :func:`qos_key` writes; empty values are rmw_zenoh's defaults); None when it is not
    one."""
    parts = chunk.split(":")
    if len(parts) < 3 or "," not in parts[2]:
        return None
    history, _, depth = parts[2].partition(",")
    values = [v or d for v, d in zip((parts[0], parts[1], history, depth), _DEFAULT)]
    if not all(v.isdigit() and len(v) <= 9 for v in values):
        return None
    names = []
    for table, v in zip((_RELIABILITY, _DURABILITY, _HISTORY), values):
        found = [name for name, number in table.items() if str(number) == v]
        if not found:
            return None
        names.append(found[0])
    return Qos(names[0], names[1], names[2], int(values[3]))


def liveliness_key(domain: int, zid: str, node_id: int, entity_id: int, kind: str,
                   namespace: str, node_name: str, *, enclave: str = "/",
                   topic: str | None = None, msgtype: str | None = None,
                   type_hash: str | None = None, qos: Qos | None = None) -> str:
    """The liveliness token of a node (``NN``) or of one of its topics (``MP``, ``MS``)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown entity kind {kind!r}")
    parts = [ADMIN_SPACE, str(domain), zid, str(node_id), str(entity_id), kind,
             mangle(enclave), mangle(namespace), mangle(node_name)]
    if kind != "NN":
        if topic is None or msgtype is None or type_hash is None:
            raise ConfigError("a publisher or subscription token needs topic, type and hash")
        parts += [mangle(topic), dds_type_name(msgtype), type_hash, qos_key(qos or Qos())]
    return "/".join(parts)


def entity_gid(liveliness: str) -> bytes:
    """The entity's 16-byte GID: XXH3-128 of its liveliness key (low half first)."""
    import xxhash

    h = xxhash.xxh3_128_intdigest(liveliness.encode())
    return struct.pack("<QQ", h & 0xFFFF_FFFF_FFFF_FFFF, h >> 64)


ATTACHMENT_SIZE = 33
_ATTACHMENT = struct.Struct("<qqB16s")
#: The keyed layout of earlier rmw_zenoh releases: each value after its name.
_KEYED = struct.Struct("<16sq17sq12s16s")
_KEYS = (b"\x0fsequence_number", b"\x10source_timestamp", b"\x0asource_gid\x10")


@dataclass(frozen=True)
class Attachment:
    """The metadata rmw_zenoh attaches to every sample; ``keyed``: in the layout of
    earlier releases (see the module)."""

    sequence_number: int
    source_timestamp: int  # ns since the epoch
    source_gid: bytes  # 16 bytes
    keyed: bool = False

    def encode(self) -> bytes:
        if len(self.source_gid) != 16:
            raise ConfigError("source_gid must be 16 bytes")
        if self.keyed:
            return _KEYED.pack(_KEYS[0], self.sequence_number, _KEYS[1],
                               self.source_timestamp, _KEYS[2], self.source_gid)
        return _ATTACHMENT.pack(self.sequence_number, self.source_timestamp, 16, self.source_gid)

    @classmethod
    def decode(cls, data: bytes) -> Attachment:
        if len(data) == _KEYED.size:
            k1, seq, k2, stamp, k3, gid = _KEYED.unpack(data)
            if (k1, k2, k3) == _KEYS:
                return cls(seq, stamp, gid, keyed=True)
        elif len(data) == ATTACHMENT_SIZE and data[16] == 16:
            seq, stamp, _n, gid = _ATTACHMENT.unpack(data)
            return cls(seq, stamp, gid)
        raise MessageError(f"not an rmw_zenoh attachment ({len(data)} bytes: "
                           f"{data[:40].hex(' ')})")


@dataclass(frozen=True)
class Entity:
    """One liveliness token, parsed (what ``ros2 node list`` / ``topic list`` show)."""

    domain: int
    zid: str
    node_id: str
    entity_id: str
    kind: str  # "NN", "MP", "MS", "SS", "SC"
    enclave: str
    namespace: str
    node_name: str
    topic: str | None = None
    msgtype: str | None = None  # pkg/msg/Name
    type_hash: str | None = None
    qos: str | None = None

    @property
    def node(self) -> str:
        """The node's full name (``/robot1/base_bridge``)."""
        return f"{self.namespace.rstrip('/')}/{self.node_name}"


def parse_liveliness(key: str) -> Entity | None:
    """An :class:`Entity` from a liveliness key; None when it is not rmw_zenoh's."""
    parts = key.split("/")
    if len(parts) < 9 or parts[0] != ADMIN_SPACE or parts[5] not in KINDS or not all(parts):
        return None
    try:
        domain = int(parts[1])
    except ValueError:
        return None
    base = dict(domain=domain, zid=parts[2], node_id=parts[3], entity_id=parts[4],
                kind=parts[5], enclave=demangle(parts[6]), namespace=demangle(parts[7]),
                node_name=demangle(parts[8]))
    if parts[5] == "NN":
        return Entity(**base)  # type: ignore[arg-type]
    if len(parts) < 13:
        return None
    try:
        msgtype = ros_type_name(parts[10])
    except MessageError:
        msgtype = parts[10]
    return Entity(**base, topic=demangle(parts[9]), msgtype=msgtype,  # type: ignore[arg-type]
                  type_hash=parts[11], qos=parts[12])


class Freshness:
    """Tells samples older than ``max_age`` seconds from fresh ones, by their attachment's
    source timestamp, with no need for the machines' clocks to agree.

    Per source (its GID) it keeps the smallest ``now - source_timestamp`` seen: the
    clock offset plus the quickest delivery. A sample later than that by more than
    ``max_age`` waited somewhere (a link down, a TCP backlog delivered at once after a
    partition) and is stale. The first sample of a source sets its offset and is
    taken as fresh. Sans-I/O: ``now_ns`` is given (wall clock, ns).
    """

    #: Sources remembered at most (the oldest is forgotten first).
    MAX_SOURCES = 256

    def __init__(self, max_age: float) -> None:
        self.max_age_ns = int(max_age * 1e9)
        self._offset: dict[bytes, int] = {}
        self.last_age_ns: int | None = None  # of the latest sample: delivery delay + offset

    def fresh(self, attachment: Attachment, now_ns: int) -> bool:
        delay = now_ns - attachment.source_timestamp
        self.last_age_ns = delay
        gid = attachment.source_gid
        best = self._offset.get(gid)
        if best is None or delay < best:
            if best is None and len(self._offset) >= self.MAX_SOURCES:
                del self._offset[next(iter(self._offset))]
            self._offset[gid] = best = delay
        return delay - best <= self.max_age_ns
