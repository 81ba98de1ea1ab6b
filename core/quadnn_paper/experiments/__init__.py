"""The paper's experiments that are not engine runs, as plain functions a section computes through
:class:`~quadnn_paper.engine.Computation`: the expressivity mathematics and the Runge trainer."""
