"""The robot fish's firmware side: main controller, body and free-swimming behaviour.

The host side of the fish's action link is :mod:`fwbridge.bridge.action_link`;
the answer payloads are :mod:`fwbridge.protocols.fish_payloads`.
"""
