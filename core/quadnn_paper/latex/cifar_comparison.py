"""LaTeX heads of the CIFAR-10 comparison's tables, and of the report's overview tables that the
comparison section writes (:mod:`quadnn_paper.execution.overview`)."""

from ._claims import CLAIMS_ALIGN

HEADS = {
    "comparison_claims": {"align": CLAIMS_ALIGN},
    "comparison_pair_claims": {"align": CLAIMS_ALIGN},
    "standin": {"align": "llllrrlrr"},
    "full_cost": {"align": "lrrl"},
}
