"""Small Qt helpers every GUI layer may use: the theme (colours, fonts) and plain-text labels.

Layer: the bottom of the GUI; imports nothing else of blockflow.gui.
"""
