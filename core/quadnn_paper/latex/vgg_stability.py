"""LaTeX heads of the VGG stability tables."""

from ._claims import CLAIMS_ALIGN

HEADS = {
    "vgg_stability": {"align": "lrlrr"},
    "vgg_claims": {"align": CLAIMS_ALIGN},
}
