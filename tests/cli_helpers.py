"""Kept for older imports: the helpers live in :mod:`tests.helpers`."""

from tests.helpers import ROOT, cli_env, fwbridge_argv, run_cli

__all__ = ["ROOT", "cli_env", "fwbridge_argv", "run_cli"]
