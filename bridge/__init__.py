"""I/O and runtime: serial transports, the hardware lifecycle, bridge nodes, captures.

Imports point down only: ``bridge`` uses ``protocols`` (and pyserial,
pyserial-asyncio); nothing here imports the CLI.
"""
