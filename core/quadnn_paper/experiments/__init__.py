"""The paper's experiments that are not engine runs, as plain functions a section computes through
:class:`~quadnn_paper.engine.Computation`: the expressivity mathematics, the Runge trainer, the
efficiency measurements, the tuning's exact check at gamma 0, and the ImageNet and KITTI sections'
looks at their data (their arrays kept exactly in JSON by :mod:`.arrays`)."""
