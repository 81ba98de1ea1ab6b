"""LaTeX head of the KITTI metrics table."""

from quadnn_paper.engine.lapdepth import METRICS

# The metrics as typeset (the table's plain names: kitti_lapdepth.METRIC_LABELS).
_METRICS = dict(
    abs_rel="AbsRel",
    sq_rel="SqRel",
    rmse="RMSE",
    rmse_log=r"RMSE$_{\log}$",
    d1=r"$\delta_1$",
    d2=r"$\delta_2$",
    d3=r"$\delta_3$",
)

HEADS = {
    "kitti_metrics": {
        "header_tex": ["model", "source"] + [_METRICS[k] for k in METRICS],
        "align": "ll" + "r" * len(METRICS),
    }
}
