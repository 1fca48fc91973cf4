"""The editor's model: the open project as a Document, its undo commands (which edit through the
Qt-free mutators of blockflow.project and Document.apply), its pages compiled in the background,
wire checks (wiring), layouts (layout), clipboard fragments (clipboard), autosave and recovery.

Layer: the lowest of the GUI's own layers but common/; canvas, panels and the shell read it.
"""
