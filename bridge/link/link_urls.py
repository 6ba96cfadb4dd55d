"""Which link URLs may be opened: device paths and an allow-list of URL schemes.

A link URL comes from a config file or a command line, so it must not be a
way to do more than open a link. pyserial's ``spy://`` writes a trace to any
file named in the URL (``spy:///dev/x?file=/any/path`` overwrites it),
``alt://`` picks an implementation class by name and ``hwgrep://`` opens
whichever port first matches a pattern: none of them is allowed. The
allowed schemes only ever open a link: a TCP socket (``socket://``,
``rfc2217://``), an in-process loopback (``loop://``), a CP2110 USB-UART
bridge (``cp2110://``), the simulated firmware (``sim://``), and schemes a
program registers in code with :func:`register_url_handler`.

Pure: no serial port is touched here.
"""

from __future__ import annotations

from fwbridge.protocols.errors import ConfigError

__all__ = [
    "REFUSED_SCHEMES",
    "SAFE_SCHEMES",
    "URL_HANDLERS",
    "UnsafeURLError",
    "allowed_schemes",
    "check_link_url",
    "is_loopback_host",
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

#: Schemes served by packages outside pyserial: scheme -> package holding
#: ``protocol_<scheme>``. The simulated endpoints register ``sim`` here.
URL_HANDLERS: dict[str, str] = {"sim": "fwbridge.bridge.sim"}


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
    return sorted(SAFE_SCHEMES | set(URL_HANDLERS))


def check_link_url(url: str) -> str | None:
    """The URL's scheme (None for a device path); :class:`UnsafeURLError` if not allowed."""
    scheme = url_scheme(url)
    if scheme is None or scheme in SAFE_SCHEMES or scheme in URL_HANDLERS:
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
