"""firmware_ref on a Cortex-M3 (QEMU mps2-an385): flash, RAM, stack and instructions per byte.

- **Flash and RAM** of ``firmware_ref/build/qemu/fwref.elf`` (the seed-002
  link, the command watchdog, the action receiver and responder, the fish's
  system commands with IAP, the board port), from ``arm-none-eabi-size -A``;
  the largest symbols from ``nm``.
- **Worst stack depth**, two ways: statically, from ``-fstack-usage`` frame
  sizes over the call graph of the disassembly (indirect calls, the
  receivers' callbacks, are taken to reach every callback of their file;
  library routines
  without a frame size count 32 bytes), main's deepest path plus the
  deepest interrupt handler plus the 32-byte exception frame; and measured,
  from the stack the firmware paints at boot, after a workload on the link
  (command frames, action frames of the largest accepted size, damaged
  frames, unknown sub-commands).
- **Instructions per received byte**: ``firmware_ref/bench/fw_bench_cm.c``
  under ``-icount shift=0`` (one instruction = 1 ns of emulated time, read
  off SysTick), for the main loop's path (both receivers on 64-byte chunks)
  and for the sum-8 receiver byte by byte (the UART interrupt's way). QEMU
  does not implement the DWT cycle counter (the program checks and says
  so), so these are instruction counts: a Cortex-M3 runs about 1.2 to 1.5
  cycles per instruction from zero-wait memory.

The anchors (published figures, not measured here) are in the report's text.

Usage: python -m bench.bench_firmware_qemu [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path
from typing import Any

from bench.common import machine, table

ROOT = Path(__file__).resolve().parent.parent
FIRMWARE = ROOT / "firmware_ref"
QB = FIRMWARE / "build" / "qemu"
ELF = QB / "fwref.elf"
BENCH_ELF = QB / "fw_bench_cm.elf"
#: Where an indirect call may go, by the source file of the caller: the receivers call
#: their frame callbacks, everything else calls only the transmit callback.
CALLBACKS = {"fw_sum8.c": ("on_cmd_frame",),
             "fw_action.c": ("on_action_frame", "on_action_reject", "board_link_write")}
TX_CALLBACK = ("board_link_write",)
ISRS = ("Uart0Rx_Handler", "Uart0Tx_Handler", "Timer0_Handler", "Default_Handler")
EXCEPTION_FRAME = 32  # r0-r3, r12, lr, pc, xPSR stacked on entry (no FPU on the M3)
UNKNOWN_FRAME = 32  # a library routine without -fstack-usage data

# Published anchors (bench/REPORT.md cites them).
MICRO_ROS_PUB_B = 400  # one publisher, default configuration (micro-ROS memory profiling, 2020)
MICRO_ROS_SUB_B = 8700  # one subscriber, same configuration


def build() -> None:
    for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            raise SystemExit(f"error: {tool} is needed (apt-get install gcc-arm-none-eabi "
                             "libnewlib-arm-none-eabi qemu-system-arm)")
    subprocess.run(["make", "-s", "-C", str(FIRMWARE), "qemu", "qemu-bench"], check=True,
                   stdout=subprocess.DEVNULL)


def sizes() -> dict[str, int]:
    """Bytes per section (``size -A``): flash is .text + .data, RAM .data + .bss; the
    store and the banks (NOLOAD regions that stand in for flash) apart."""
    out = subprocess.run(["arm-none-eabi-size", "-A", str(ELF)], capture_output=True,
                         text=True, check=True).stdout
    sec = {p[0]: int(p[1]) for p in (ln.split() for ln in out.splitlines())
           if len(p) == 3 and p[0].startswith(".") and p[1].isdigit()}
    text, data, bss = sec.get(".text", 0), sec.get(".data", 0), sec.get(".bss", 0)
    syms = subprocess.run(["arm-none-eabi-nm", "-S", str(ELF)], capture_output=True,
                          text=True, check=True).stdout
    top = {p[-1]: int(p[0], 16) for p in (ln.split() for ln in syms.splitlines())
           if len(p) == 3 and p[-1] in ("__stack_top", "__stack_bottom")}
    stack = top.get("__stack_top", 0) - top.get("__stack_bottom", 0)
    return {"text": text, "data": data, "bss": bss, "flash": text + data,
            "ram_static": data + bss, "stack_reserved": stack,
            "store": sec.get(".noinit", 0), "banks": sec.get(".banks", 0)}


def largest_symbols(n: int = 10) -> list[tuple[str, str, int]]:
    out = subprocess.run(["arm-none-eabi-nm", "-S", "--size-sort", "-C", str(ELF)],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    seen: set[str] = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] not in seen:  # one name per address (aliases)
            seen.add(parts[0])
            kind = "RAM" if parts[2].lower() in ("b", "d") else "flash"
            rows.append((parts[3], kind, int(parts[1], 16)))
    return sorted(rows, key=lambda r: -r[2])[:n]


def frame_sizes() -> tuple[dict[str, int], dict[str, str]]:
    """Frame size and source file of each function (clones: "f.isra", "f.constprop")."""
    frames: dict[str, int] = {}
    files: dict[str, str] = {}
    for su in (QB / "obj").rglob("*.su"):
        for line in su.read_text().splitlines():
            where, size, _ = line.split("\t")
            name = where.rsplit(":", 1)[-1]
            frames[name] = int(size)
            files[name] = Path(where.split(":", 1)[0]).name
    return frames, files


def _su_name(fn: str) -> str:
    """A disassembly name as -fstack-usage spells it ("f.isra.0" -> "f.isra")."""
    return re.sub(r"\.(\d+)$", "", fn)


def call_graph() -> tuple[dict[str, set[str]], set[str]]:
    """Direct calls (bl, and b to another function) and the functions that call indirectly."""
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(ELF)],
                         capture_output=True, text=True, check=True).stdout
    graph: dict[str, set[str]] = {}
    indirect: set[str] = set()
    current = ""
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            current = m.group(1)
            graph.setdefault(current, set())
            continue
        m = re.search(r"\s(bl|b|b\.w|b\.n)\s+[0-9a-f]+ <([^+>]+)>", line)
        if m and current and m.group(2) != current:
            graph[current].add(m.group(2))
        elif current and re.search(r"\sblx\s+r\d+", line):
            indirect.add(current)
    return graph, indirect


def static_stack() -> dict[str, Any]:
    frames, files = frame_sizes()
    graph, indirect = call_graph()
    for fn in indirect:
        graph[fn] |= set(CALLBACKS.get(files.get(_su_name(fn), ""), TX_CALLBACK))
    unknown: set[str] = set()
    memo: dict[str, tuple[int, list[str]]] = {}

    def depth(fn: str, seen: frozenset[str]) -> tuple[int, list[str]]:
        if fn in memo:
            return memo[fn]
        if fn in seen:
            raise SystemExit(f"error: recursion through {fn}: no static bound")
        own = frames.get(_su_name(fn))
        if own is None:
            unknown.add(fn)
            own = UNKNOWN_FRAME
        best: tuple[int, list[str]] = (0, [])
        for callee in graph.get(fn, ()):
            d = depth(callee, seen | {fn})
            if d[0] > best[0]:
                best = d
        memo[fn] = (own + best[0], [fn, *best[1]])
        return memo[fn]

    main = depth("Reset_Handler", frozenset())
    isr = max((depth(f, frozenset()) for f in ISRS if f in graph), key=lambda d: d[0])
    return {"main": main[0], "main_path": main[1], "isr": isr[0], "isr_path": isr[1],
            "worst": main[0] + isr[0] + EXCEPTION_FRAME,
            "unknown": sorted(unknown)}


def painted_stack(quick: bool) -> dict[str, Any]:
    """Run the firmware, drive its link hard, and read the painted stack's high-water mark."""
    from fwbridge.cli_verbs.fw import QemuBoard
    from fwbridge.protocols import action_frame, cmd_frame
    from fwbridge.protocols.action_frame import ActionFrame

    board = QemuBoard(ELF)
    board.start()
    try:
        fd = os.open(board.port, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        big = ActionFrame(0x01, 0x04, 0x31, bytes(range(256)) + bytes(64))  # 320 data bytes
        bad = bytearray(action_frame.encode(ActionFrame(0x02, 0x03, 0x36, b"\x01\x02")))
        bad[-4] ^= 0xFF
        workload = [
            cmd_frame.encode(cmd_frame.CmdFrame(0.5, -0.25, 1.0)),
            action_frame.encode(ActionFrame(0x00, 0x03, 0x36, b"")),  # config read: a result
            action_frame.encode(ActionFrame(0x00, 0x03, 0x01, b"")),  # status: a result
            action_frame.encode(big),
            action_frame.encode(ActionFrame(0x01, 0x05, 0x99, b"")),  # unknown sub
            bytes(bad),
            b"\xfe\xef\x01\x04\xff\x7f\x21" + bytes(32),  # false header, huge length
            b"\xaa\x55\xaa" + bytes(20),
        ]
        rounds = 20 if quick else 100
        written = 0
        halt = threading.Event()

        def drain() -> None:  # odometry, answers and results: a host that reads them
            while not halt.is_set():
                if _readable(fd, 0.05):
                    os.read(fd, 65536)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        for _ in range(rounds):
            for chunk in workload:
                os.write(fd, chunk)
                written += len(chunk)
            time.sleep(0.005)
        st: dict[str, Any] = {}
        end = time.monotonic() + 180.0  # QEMU takes a few kB/s from a pty on a busy host
        while time.monotonic() < end and st.get("rx_bytes", -1) < written:
            time.sleep(0.5)  # a counters line costs the board ~1 kB of polled output: not often
            before = board.latest["ms"] if board.latest else -1
            board.request_status()
            st = board.wait_status(before, timeout=2.0) or st
        halt.set()
        reader.join(2.0)
        os.close(fd)
    finally:
        board.stop()
    return {"stack_used": st.get("stack_used"), "stack_size": st.get("stack_size"),
            "cmd_frames": st.get("cmd", {}).get("frames"),
            "action_frames": st.get("action", {}).get("frames"),
            "answers": st.get("responder", {}).get("answered"), "rounds": rounds}


def _readable(fd: int, timeout: float = 0.0) -> bool:
    import select

    return bool(select.select([fd], [], [], timeout)[0])


def instructions_per_byte() -> list[dict[str, Any]]:
    proc = subprocess.Popen(
        ["qemu-system-arm", "-M", "mps2-an385", "-nographic", "-monitor", "none",
         "-serial", "null", "-serial", "stdio", "-icount", "shift=0", "-kernel", str(BENCH_ELF)],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    cases = []
    try:
        for line in proc.stdout:
            if line.startswith("done"):
                break
            if line.startswith("{"):
                cases.append(json.loads(line))
    finally:
        proc.kill()
        proc.wait()
    for c in cases:
        ns_per_cycle = 1e9 / c["clock_hz"]  # shift=0: 1 ns of emulated time per instruction
        c["instructions"] = round(c["systick_cycles"] * ns_per_cycle)
        c["per_byte"] = c["instructions"] / c["bytes"]
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    build()
    sz = sizes()
    st = static_stack()
    painted = painted_stack(args.quick)
    ipb = instructions_per_byte()
    ram_used = sz["ram_static"] + (painted["stack_used"] or 0)
    ram_reserved = sz["ram_static"] + sz["stack_reserved"]
    micro_ros = MICRO_ROS_PUB_B + MICRO_ROS_SUB_B
    print(f"# {machine()}")
    print(f"# arm-none-eabi-gcc -Os -mcpu=cortex-m3 -mthumb, newlib-nano; {ELF.relative_to(ROOT)}")
    print("\n# Footprint (goal: under 32 KB flash and 8 KB RAM)")
    print(table(["", "bytes"], [
        ("flash (.text + .data)", sz["flash"]),
        ("RAM, static (.data + .bss)", sz["ram_static"]),
        ("stack reserved (linker script)", sz["stack_reserved"]),
        ("RAM, static + reserved stack", ram_reserved),
        ("stack used, worst (static analysis)", st["worst"]),
        ("stack used, measured (painted, after the workload)", painted["stack_used"]),
        ("RAM, static + measured stack", ram_used),
        ("settings store (stands in for a flash sector)", sz["store"]),
        ("firmware banks A + B (stand in for flash)", sz["banks"]),
    ]))
    print(f"\nstatic worst: main {st['main']} B ({' > '.join(st['main_path'])}) + interrupt "
          f"{st['isr']} B ({' > '.join(st['isr_path'])}) + {EXCEPTION_FRAME} B exception frame")
    print(f"library routines counted {UNKNOWN_FRAME} B each (no -fstack-usage data): "
          f"{', '.join(st['unknown']) or 'none'}")
    print(f"measured after {painted['rounds']} rounds: {painted['cmd_frames']} command frames, "
          f"{painted['action_frames']} action frames (320-byte data among them), "
          f"{painted['answers']} answers")
    print(f"\nmicro-ROS, one publisher + one subscriber (published, default configuration): "
          f"~{micro_ros} B; this firmware: {ram_used} B static + measured stack, "
          f"{micro_ros / ram_used:.1f}x smaller ({micro_ros / ram_reserved:.1f}x counting the "
          "whole reserved stack)")
    # The goal counts what the firmware reserves, with a margin kept on the stack: the
    # reserve at least the static worst case + 25 %, the measured mark under 3/4 of it.
    budget = micro_ros // 4
    margin_ok = (sz["stack_reserved"] >= st["worst"] * 5 // 4
                 and (painted["stack_used"] or sz["stack_reserved"]) * 4
                 < sz["stack_reserved"] * 3)
    met = ram_reserved <= budget and margin_ok
    print(f"4x goal, static + reserved stack: {'met' if met else 'not met'} "
          f"({ram_reserved} B of {budget} B, margin {budget - ram_reserved} B; stack reserved "
          f"{sz['stack_reserved']} B = static worst {st['worst']} B "
          f"+ {100 * (sz['stack_reserved'] - st['worst']) // max(st['worst'], 1)} %)")
    print("\n# Largest symbols")
    print(table(["symbol", "in", "bytes"], largest_symbols()))
    print("\n# Instructions per received byte (QEMU -icount shift=0; no DWT cycle counter)")
    print(table(["stream, path", "bytes", "frames", "instructions", "per byte"], [
        (c["case"], c["bytes"], c["frames"], c["instructions"], f"{c['per_byte']:.1f}")
        for c in ipb]))
    dwt = any(c["dwt"] for c in ipb)
    print(f"DWT cycle counter: {'counts' if dwt else 'not implemented by QEMU (reads constant)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
