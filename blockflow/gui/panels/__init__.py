"""The dock panels around the canvas: inspector, palette, problems, values, stepper, explain, train.

Layer: beside canvas/, above session/ and document/; only the shell (app, main_window) imports it.
"""
