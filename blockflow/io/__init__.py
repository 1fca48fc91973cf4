"""The project file format: reading and writing `.bflow.json` files, and moving their data files.

Layer: above the base (spec, errors, project, registry, datafiles), below compile/ and run/.
"""
