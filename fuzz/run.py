"""Run one fuzz target under atheris (libFuzzer options pass through).

    python -m fuzz.run TARGET [libFuzzer options] [CORPUS_DIR ...]
    python -m fuzz.run sum8_receiver -max_total_time=600 fuzz/corpus/sum8_receiver
    python -m fuzz.run description_loader -max_total_time=600 CORPUS_COPY

``fuzz/corpus/<target>/`` holds seed inputs (valid ones, so a run starts past
the refusals); give a copy of it, since libFuzzer adds the inputs it finds.

Crashes are written as ``crash-<sha1>`` files (``-artifact_prefix=`` sets
where); keep each one in ``tests/fixtures/fuzz/<target>/`` so the
regression test replays it forever after.
"""

from __future__ import annotations

import contextlib
import sys

#: Modules outside protocols/ that parse outside input (captures, config files).
PARSERS = ("fwbridge.bridge.record.serial_pcapng", "fwbridge.bridge.node.config",
           "fwbridge.bridge.robots.arm.config", "fwbridge.bridge.record.can_logs",
           "fwbridge.bridge.record.can_pcapng", "fwbridge.can_bus.daemon",
           "fwbridge.can_bus.daemon_bus")


def _import_parsers() -> None:
    """Import every parser module so atheris instruments it (coverage feedback)."""
    import importlib
    import pkgutil

    import fwbridge.protocols

    package = fwbridge.protocols
    names = [i.name for i in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}.")]
    for name in (*names, *PARSERS):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def main() -> None:
    if len(sys.argv) < 2:
        from fuzz.targets import TARGETS

        sys.exit(f"usage: python -m fuzz.run TARGET [options]; targets: {', '.join(TARGETS)}")
    name = sys.argv[1]
    import atheris

    with atheris.instrument_imports():
        _import_parsers()
        from fuzz.targets import TARGETS

    if name not in TARGETS:
        sys.exit(f"unknown target {name!r}; targets: {', '.join(TARGETS)}")
    target = TARGETS[name]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
