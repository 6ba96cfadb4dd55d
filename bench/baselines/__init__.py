"""Faithful ports of the seeds' own receivers, kept as baselines.

They are here to be measured against and to show, in the tests, the frames
they lose. Nothing in fwbridge uses them.
"""
