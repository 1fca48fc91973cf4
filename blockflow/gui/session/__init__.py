"""The editor's session: the current run of a page, its results, and the work done off the UI thread.

Layer: above document/; canvas/ and panels/ read it.
"""
