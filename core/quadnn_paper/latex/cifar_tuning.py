"""LaTeX heads of the CIFAR tuning tables."""

from ._claims import CLAIMS_ALIGN

HEADS = {
    "cifartuning_claims": {"align": CLAIMS_ALIGN},
}
