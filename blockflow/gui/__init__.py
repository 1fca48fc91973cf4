"""The PySide6 editor: document and undo commands, canvas, panels, main window, headless render.

May import everything in blockflow; nothing outside blockflow.gui imports it.
"""
