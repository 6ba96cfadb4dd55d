"""Code generators: C99 (``fwbridge gen c``), a Wireshark dissector, a DBC.

Each takes frame descriptions (:mod:`fwbridge.protocols.description`) and
returns text; the CLI writes it. Generators import the protocols floor only.
"""
