"""Running a compiled Program: forward and backward passes, memory plans, training, gradient checks.

Layer: above compile/; below cli and the GUI.
"""
