"""Small Qt helpers every GUI layer may use: the theme (colours, fonts), plain-text labels, the
one way to work off the UI thread (worker.py), and the refresh-once wiring of panels (refresh.py).

Layer: the bottom of the GUI; imports nothing else of blockflow.gui.
"""
