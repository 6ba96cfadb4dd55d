"""Recording: every capture writer and reader for serial and CAN links (pcapng, MCAP,
python-can logs) and the Foxglove live view; they are sinks of the node."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwbridge.lazy import lazy_exports

if TYPE_CHECKING:
    from fwbridge.bridge.record.can_logs import (
        open_writer as open_writer,
    )
    from fwbridge.bridge.record.can_logs import (
        read_messages as read_messages,
    )
    from fwbridge.bridge.record.can_pcapng import (
        PcapngReader as PcapngReader,
    )
    from fwbridge.bridge.record.can_pcapng import (
        PcapngWriter as PcapngWriter,
    )
    from fwbridge.bridge.record.can_pcapng import (
        read_pcap as read_pcap,
    )


#: Public name -> defining module; the TYPE_CHECKING block above names the same.
_EXPORTS = {
    "open_writer": "fwbridge.bridge.record.can_logs",
    "read_messages": "fwbridge.bridge.record.can_logs",
    "PcapngReader": "fwbridge.bridge.record.can_pcapng",
    "PcapngWriter": "fwbridge.bridge.record.can_pcapng",
    "read_pcap": "fwbridge.bridge.record.can_pcapng",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
