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


__getattr__, __dir__ = lazy_exports(__name__)
