"""Code generators: C99 (``fwbridge gen c``), a Wireshark dissector, a DBC.

Each takes frame descriptions (:mod:`fwbridge.protocols.descriptions.loader`) and
returns text; the CLI writes it. Generators import the protocols floor only.
"""

from fwbridge.lazy import one_name

one_name(__name__)  # not importable as bare `codegen`
