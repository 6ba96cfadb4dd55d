"""The verbs of the ``fwbridge`` command, one module per family.

``cli.py`` assembles them into one click group; nothing else imports this
package.
"""

from fwbridge.lazy import one_name

one_name(__name__)  # not importable as bare `cli_verbs`

__all__: list[str] = []  # the command line is the interface; no Python API here
