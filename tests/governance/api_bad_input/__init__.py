"""Every bad input of the budget API is refused with a clear status, names the field, and
changes nothing in the database.

One module per kind of bad input. Each test takes a snapshot of every row the API can write (allocations, requests and their
states, lines, decisions, tokens) before the call and compares it after
(the ``unchanged`` fixture, ``conftest.py``).
"""
