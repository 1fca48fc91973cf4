"""Qt-free presenters: what a view shows of a program or a run, as plain data a GUI or a test reads.

Layer: above compile/; below cli and the GUI. The GUI maps this data to colours and items.
"""
