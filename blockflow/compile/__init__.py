"""From a page of a project to a Program: checks, dtype and shape inference, schedule, gradient paths.

compiler.py is the driver (compile_page, compile_project); infer.py types the nodes in order;
program.py holds what a compile produces and the questions it answers; gradpaths.py works out
which wires carry gradient (program.py calls it, it never imports program.py back).

Layer: above io/ and the base; below run/, present/ and cli. Never imports Qt or the block library.
"""
