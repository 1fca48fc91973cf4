"""The editor's session: background compiles of the pages and the current run with its results.

Layer: above document/; canvas/ and panels/ read it.
"""
