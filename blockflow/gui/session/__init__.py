"""The editor's session: the runs of the open project's pages and their results, the selection,
and renames followed in one place (session.py); the run itself (runner.py).

Layer: above document/; canvas/ and panels/ read it.
"""
