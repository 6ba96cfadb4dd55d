"""The engine's private kernels: hand-tuned paths for description shapes it meets often.

:func:`~fwbridge.protocols.engine.codec_for` and
:func:`~fwbridge.protocols.engine.receiver_for` choose a kernel from the
description (``fast_path``): ``sum8`` for ``AA 55``/float32/sum-8 frames (odometry,
command), ``action_receiver`` for the action frame's shape. Each is built
from the same description as the generic path and held to it byte for byte
(frames, offsets, counters: ``tests/test_frame_receivers.py``).
"""
