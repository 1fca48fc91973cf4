"""From a page of a project to a Program: checks, dtype and shape inference, schedule, gradient paths.

Layer: above io/ and the base; below run/, present/ and cli. Never imports Qt or the block library.
"""
