"""blockflow: draw a differentiable model as a block diagram, run it, and see its gradients flow.

The package root imports nothing heavy; import the modules you need (spec, project, project_io,
compiler, runtime, gradcheck, cli).
"""
__version__ = "0.1.0"
