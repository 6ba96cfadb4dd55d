"""The verbs of the ``fwbridge`` command, one module per family.

``cli.py`` assembles them into one click group; nothing else imports this
package.
"""
