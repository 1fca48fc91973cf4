"""Running a compiled Program: forward and backward passes, memory plans, training, gradient checks.

runtime.py is the run API (run, RunResult) and the plan of a kind of run; lower.py turns a plan's
steps into straight-line Python; memplan.py checks a run's memory before it starts; training.py
runs many steps (settings.py: the optimizers and the settings a project recommends);
gradcheck.py compares gradients with finite differences.

Layer: above compile/; below cli and the GUI.
"""
