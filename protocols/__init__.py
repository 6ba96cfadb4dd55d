"""Pure protocol layer of fwbridge: schemas, codecs, receive state machines.

Sans-I/O: bytes in, events out; no serial, sockets, threads or clocks (time
comes in as an argument). See ``DESIGN.md`` for the floors above it.
"""
