"""Small Qt helpers every GUI layer may use: the theme (colours, fonts), plain-text labels, and
the one way to work off the UI thread (worker.py).

Layer: the bottom of the GUI; imports nothing else of blockflow.gui.
"""
