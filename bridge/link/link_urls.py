"""Which link URLs may be opened: device paths and an allow-list of URL schemes.

A link URL comes from a config file or a command line, so it must not be a
way to do more than open a link. pyserial's ``spy://`` writes a trace to any
file named in the URL (``spy:///dev/x?file=/any/path`` overwrites it),
``alt://`` picks an implementation class by name and ``hwgrep://`` opens
whichever port first matches a pattern: none of them is allowed. The
allowed schemes only ever open a link: a TCP socket (``socket://``,
``rfc2217://``), an in-process loopback (``loop://``), a CP2110 USB-UART
bridge (``cp2110://``), the simulated firmware (``sim://``, served once the
program offers it: ``fwbridge.bridge.sim.register()``), and schemes a program
registers in code with :func:`register_url_handler`. This floor names no
module above it: a scheme's handler is registered by the code that offers it.

Pure: no serial port is touched here.
"""

from __future__ import annotations

import re

from fwbridge.protocols.errors import ConfigError

__all__ = [
    "OFFERED_SCHEMES",
    "REFUSED_SCHEMES",
    "SAFE_SCHEMES",
    "URL_HANDLERS",
    "UnsafeURLError",
    "allowed_schemes",
    "check_link_url",
    "is_loopback_address",
    "is_loopback_host",
    "listen_warning",
    "register_url_handler",
    "url_scheme",
]

#: pyserial's own handlers that only open a link.
SAFE_SCHEMES: frozenset[str] = frozenset({"socket", "rfc2217", "loop", "cp2110"})

#: pyserial's handlers that can do more than open a link, and why they are refused.
REFUSED_SCHEMES: dict[str, str] = {
    "spy": "it writes a trace to any file the URL names",
    "alt": "it chooses the port's implementation class by name",
    "hwgrep": "it opens whichever port first matches a pattern",
}

#: Schemes served by packages outside pyserial, registered in code with
#: :func:`register_url_handler`: scheme -> package holding ``protocol_<scheme>``.
#: Empty until a program registers one: the simulated firmware serves ``sim`` once
#: asked to (``fwbridge.bridge.sim.register()``), never because it was imported.
URL_HANDLERS: dict[str, str] = {}

#: Schemes a link may name (a config file is checked before anything is opened) whose
#: handler a program offers in code, and what offers it; opening one that nothing
#: registered is a clear error, not pyserial's "protocol not known".
OFFERED_SCHEMES: dict[str, str] = {
    "sim": "the simulated firmware: fwbridge.bridge.sim.register() offers it",
}


class UnsafeURLError(ConfigError):
    """A link URL whose scheme is not on the allow-list."""


def url_scheme(url: str) -> str | None:
    """The lower-case scheme of a pyserial URL, or None for a device path."""
    head, sep, _ = url.partition("://")
    return head.lower() if sep else None


def register_url_handler(scheme: str, package: str) -> None:
    """Serve (and allow) ``scheme://`` URLs with ``package.protocol_<scheme>``.

    Code only: a config file names a URL, never a package.
    """
    URL_HANDLERS[scheme.lower()] = package


def allowed_schemes() -> list[str]:
    """Every scheme a link URL may use, sorted."""
    return sorted(SAFE_SCHEMES | set(OFFERED_SCHEMES) | set(URL_HANDLERS))


def check_link_url(url: str) -> str | None:
    """The URL's scheme (None for a device path); :class:`UnsafeURLError` if not allowed."""
    scheme = url_scheme(url)
    if (scheme is None or scheme in SAFE_SCHEMES or scheme in OFFERED_SCHEMES
            or scheme in URL_HANDLERS):
        return scheme
    why = REFUSED_SCHEMES.get(scheme)
    reason = f"'{scheme}://' URLs are not allowed ({why})" if why else (
        f"unknown URL scheme '{scheme}://'")
    raise UnsafeURLError(
        f"{reason}; a link is a device path or one of: "
        + ", ".join(f"{s}://" for s in allowed_schemes())
    )


def is_loopback_host(host: str) -> bool:
    """True when ``host`` (an address or a name) is reachable from this machine only."""
    import ipaddress
    import socket

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addrs = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


#: The host of a Zenoh endpoint (``tcp/HOST:PORT``, ``tcp/[V6]:PORT``) or of ``HOST:PORT``.
_ENDPOINT_HOST = re.compile(
    r"^(?:(?:tcp|udp|tls|quic|ws)/)?(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:/?#\[\]]*))")


def is_loopback_address(address: str) -> bool:
    """True when something listening on ``address`` is reachable from this machine only:
    a Zenoh endpoint (``tcp/127.0.0.1:7447``; a Unix socket, ``unixsock-stream/...``,
    always is), ``HOST:PORT`` or a bare host, its host a loopback address or a name
    that resolves to loopback addresses only."""
    if address.startswith("unixsock-stream/"):
        return True
    if address.count(":") > 1 and not address.startswith("[") and "/" not in address:
        return is_loopback_host(address)  # a bare IPv6 address
    m = _ENDPOINT_HOST.match(address)
    if m is None:
        return False
    host = m.group("v6") if m.group("v6") is not None else m.group("host")
    return bool(host) and is_loopback_host(host)


def listen_warning(who: str, address: str) -> str | None:
    """The one line every listener says when asked to listen beyond loopback (the
    router, the bridge, the fleet, ``fish serve``, any ROS 2 tool given a listen
    endpoint, the live view); None on loopback."""
    if is_loopback_address(address):
        return None
    return (f"warning: {who}: {address} is not a loopback address: other machines can "
            "connect to it")
