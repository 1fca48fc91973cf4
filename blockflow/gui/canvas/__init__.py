"""The diagram canvas: the view, its scene and items, gestures, gradient colouring, rendering to PNG.

Layer: beside panels/, above session/ and document/; only the shell (app, main_window) imports it.
"""
