"""What the paper's experiments are, below the sections that report them: the design of the CIFAR
study three sections share (:mod:`.cifar`: the paper's recipes, the stand-ins, the rows trained and
the engine configuration of each), and the experiments that are not engine runs, as plain functions
a section computes through :class:`~quadnn_paper.engine.Computation`: the expressivity mathematics,
the Runge trainer, the efficiency measurements, the tuning's exact check at gamma 0, and the
ImageNet and KITTI sections' looks at their data (their arrays kept exactly in JSON by
:mod:`.arrays`)."""
