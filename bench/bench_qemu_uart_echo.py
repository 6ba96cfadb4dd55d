"""Which emulated board: bytes a polled UART echo loop returns on QEMU's Cortex-M boards.

A few lines of C per board (no libc, no interrupts: read a byte when one is
there, write it back) on ``mps2-an385`` (Cortex-M3, CMSDK APB UART) and
``netduinoplus2`` (STM32F405, its USART1), fed 5,200 bytes over the pty in
bursts of 52, 520 and 5,200 bytes. firmware_ref's board port is the first
(firmware_ref/README.md says why); this is the measurement behind that.

Usage: python -m bench.bench_qemu_uart_echo [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

from bench.common import machine, table

BOARDS = {
    "mps2-an385": ("-mcpu=cortex-m3", 0x0, 0x20010000, """
#define R(a) (*(volatile unsigned *)(a))
#define U 0x40004000u
void reset(void)
{
    R(U + 0x10) = 217; R(U + 0x08) = 3;              /* BAUDDIV, TX and RX enable */
    for (;;) {
        if (R(U + 4) & 2u) {                          /* RX full */
            unsigned b = R(U);
            while (R(U + 4) & 1u) {}                  /* TX full */
            R(U) = b;
        }
    }
}"""),
    "netduinoplus2": ("-mcpu=cortex-m4", 0x08000000, 0x20020000, """
#define R(a) (*(volatile unsigned *)(a))
#define U 0x40011000u
void reset(void)
{
    R(0x40023844u) |= 1u << 4;                        /* RCC: USART1 clock */
    R(U + 0x0C) = (1u << 13) | (1u << 3) | (1u << 2); /* UE, TE, RE */
    for (;;) {
        if (R(U) & (1u << 5)) {                       /* RXNE */
            unsigned b = R(U + 4);
            while (!(R(U) & (1u << 7))) {}            /* TXE */
            R(U + 4) = b;
        }
    }
}"""),
}


def build(board: str, work: Path) -> Path:
    cpu, flash, sp, body = BOARDS[board]
    src = work / f"{board}.c"
    src.write_text("void reset(void);\n__attribute__((section(\".vectors\"), used)) static "
                   f"void *const vec[2] = {{(void *){sp:#x}u, (void *)reset}};\n{body}\n")
    ld = work / f"{board}.ld"
    ld.write_text(f"MEMORY {{ FLASH (rx) : ORIGIN = {flash:#x}, LENGTH = 1M }}\n"
                  "SECTIONS { .text : { KEEP(*(.vectors)) *(.text*) } > FLASH }\n")
    elf = work / f"{board}.elf"
    subprocess.run(["arm-none-eabi-gcc", cpu, "-mthumb", "-O1", "-nostdlib", "-T", str(ld),
                    str(src), "-o", str(elf)], check=True)
    return elf


def echo(board: str, elf: Path, burst: int, total: int = 5200) -> int:
    proc = subprocess.Popen(["qemu-system-arm", "-M", board, "-nographic", "-monitor", "none",
                             "-serial", "pty", "-kernel", str(elf)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        path = None
        while path is None:
            m = re.search(r"(/dev/pts/\d+)", proc.stdout.readline())
            path = m.group(1) if m else None
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        time.sleep(1.5)  # QEMU polls a pty for a reader about once a second
        data = bytes((i * 7) & 0xFF for i in range(total))
        got = b""
        for k in range(0, total, burst):
            os.write(fd, data[k:k + burst])
            end = time.monotonic() + 0.02
            while time.monotonic() < end:
                if select.select([fd], [], [], 0.005)[0]:
                    got += os.read(fd, 65536)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.05)[0]:
                got += os.read(fd, 65536)
        os.close(fd)
        return len(got) if got == data[:len(got)] else -len(got)
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            raise SystemExit(f"error: {tool} is needed")
    bursts = (520,) if args.quick else (52, 520, 5200)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for board in BOARDS:
            elf = build(board, Path(tmp))
            rows.append((board, *(echo(board, elf, b) for b in bursts)))
    print(f"# {machine()}")
    print("# bytes echoed of 5,200, in order (negative: reordered or damaged)")
    print(table(["board", *(f"bursts of {b}" for b in bursts)], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
