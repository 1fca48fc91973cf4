"""The editor's model: the open project as a Document, its undo commands, its pages compiled in the
background, autosave and recovery.

Layer: the lowest of the GUI's own layers but common/; canvas, panels and the shell read it.
"""
