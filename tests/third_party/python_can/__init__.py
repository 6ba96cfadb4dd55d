"""python-can 4.6.1's own tests (test/ of its source distribution), unmodified.

Licensed under the GNU LGPL v3 (LICENSE.txt here), as python-can is. Run
against the simulated bus by tests/test_can_python_can_suite.py.
"""
