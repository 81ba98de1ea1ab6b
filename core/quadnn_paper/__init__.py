"""quadnn_paper: the companion of "On Expressivity and Trainability of Quadratic Networks".

Everything here exists to reproduce the paper with the :mod:`quadnn` library: the training
engine, one module per paper section, the paper's published numbers and the report writer.
It imports ``quadnn``; ``quadnn`` never imports it.
"""
