"""LaTeX heads of the ImageNet table (its top-5 column only on data with enough classes)."""

from ._claims import CLAIMS_ALIGN

# The error table's columns as typeset; the others print as named.
_COLUMNS = {
    "paper label": "paper",
    "params (ImageNet)": r"params\,(M)",
    "params (run)": r"run\,(M)",
    "ours top-1": "top-1",
    "ours top-5": "top-5",
}


def _errors_head(header: list[str]) -> dict:
    """Two label columns, then numbers."""
    return {"header_tex": [_COLUMNS.get(h, h) for h in header], "align": "ll" + "r" * (len(header) - 2)}


HEADS = {"imagenet_errors": _errors_head, "imagenet_claims": {"align": CLAIMS_ALIGN}}
