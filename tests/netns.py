"""Separate hosts on one machine for the tests: Linux network namespaces joined by veth pairs.

    with Hosts("a", "b", "c") as net:
        ab = net.link("a", "b")        # a: 10.77.<n>.1/24, b: 10.77.<n>.2/24
        proc = net.popen("a", [...])   # a process on host a
        net.set_link(ab, up=False)     # a partition, until set_link(ab, up=True)

Each host has its own loopback (up) and one address per link; nothing is
routed between links, and no host's interface but the veth ends it made is
touched. Teardown (always, also after a failure) ends the processes it
started, by their pids, and deletes its namespaces, which deletes their
links. Namespace and interface names carry this process's pid, so runs in
parallel do not meet. Needs root and ``ip`` (iproute2): :func:`unavailable`
says why not, for a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Hosts", "Link", "Reports", "unavailable"]

#: The addresses of the test hosts: 10.77.<link>.<1|2>/24, nowhere else.
SUBNET = "10.77"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10,
                          check=check)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None when they can)."""
    if shutil.which("ip") is None:
        return "no ip (iproute2) to make network namespaces"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"fwbprobe{os.getpid()}"
    res = _ip("netns", "add", name, check=False)
    if res.returncode != 0:
        return f"ip netns add failed: {res.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


@dataclass(frozen=True)
class Link:
    """A veth pair between two hosts, and the address of each end."""

    a: str
    b: str
    ifname_a: str
    ifname_b: str
    addr_a: str
    addr_b: str

    def addr(self, host: str) -> str:
        """The address of ``host``'s end."""
        return self.addr_a if host == self.a else self.addr_b


class Hosts:
    """Network namespaces as hosts; a context manager that always cleans up."""

    def __init__(self, *names: str) -> None:
        self.tag = f"fwb{os.getpid()}"
        self.names = {n: f"{self.tag}{n}" for n in names}
        self.links: list[Link] = []
        self.procs: list[subprocess.Popen[Any]] = []

    def __enter__(self) -> Hosts:
        try:
            for ns in self.names.values():
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def link(self, a: str, b: str) -> Link:
        """A veth pair from host ``a`` to host ``b``, both ends up, each with an address."""
        n = len(self.links) + 1
        ia, ib = f"{self.tag[-6:]}{a}{n}", f"{self.tag[-6:]}{b}{n}"
        link = Link(a, b, ia, ib, f"{SUBNET}.{n}.1", f"{SUBNET}.{n}.2")
        _ip("link", "add", ia, "netns", self.names[a], "type", "veth", "peer", "name", ib,
            "netns", self.names[b])
        for host, ifname, addr in ((a, ia, link.addr_a), (b, ib, link.addr_b)):
            _ip("-n", self.names[host], "addr", "add", f"{addr}/24", "dev", ifname)
            _ip("-n", self.names[host], "link", "set", ifname, "up")
        self.links.append(link)
        return link

    def set_link(self, link: Link, *, up: bool) -> None:
        """Take a link down (both ends: a partition) or up again."""
        state = "up" if up else "down"
        for host, ifname in ((link.a, link.ifname_a), (link.b, link.ifname_b)):
            _ip("-n", self.names[host], "link", "set", ifname, state)

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run on ``host``."""
        return ["ip", "netns", "exec", self.names[host], *argv]

    def popen(self, host: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """A process on ``host``, ended (by its pid) at teardown if still running."""
        proc = subprocess.Popen(self.argv(host, argv), **kw)
        self.procs.append(proc)
        return proc

    def run(self, host: str, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.argv(host, argv), **kw)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs.clear()
        for ns in self.names.values():
            _ip("netns", "del", ns, check=False)


class Reports:
    """The JSON lines of tests/fleet_operator.py, each kept with robot numbers as ints."""

    def __init__(self, stream: Any) -> None:
        self.all: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            report = json.loads(raw)
            for key in ("n", "vx", "age_ms", "diag"):
                report[key] = {int(k): v for k, v in report[key].items()}
            with self._cond:
                self.all.append(report)
                self._cond.notify_all()

    @property
    def latest(self) -> dict[str, Any]:
        with self._cond:
            return self.all[-1] if self.all else {"n": {}, "vx": {}, "age_ms": {}, "diag": {}}

    def since(self, t: float) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.all if r["t"] >= t]

    def wait(self, pred: Any, timeout: float, what: str) -> dict[str, Any]:
        """The first report from now on for which ``pred(report)`` holds."""
        end = time.monotonic() + timeout
        with self._cond:
            start = len(self.all)
            while True:
                for report in self.all[start:]:
                    if pred(report):
                        return report
                start = len(self.all)
                left = end - time.monotonic()
                if left <= 0:
                    last = self.all[-1] if self.all else None
                    raise AssertionError(f"{what}: not within {timeout} s; last report {last}")
                self._cond.wait(left)
