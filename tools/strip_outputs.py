"""Clear notebook outputs except on cells marked ``# NBVAL_CHECK_OUTPUT``.

nbval compares the outputs of marked cells against those stored in the notebook, so those
(deterministic, smoke-profile) outputs are committed; everything else is a build product.

    python tools/strip_outputs.py notebooks/*.ipynb
"""

import nbformat


def strip(path: str) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
        if "NBVAL_CHECK_OUTPUT" not in cell.source:
            cell.outputs = []
            cell.execution_count = None
    for key in ("papermill",):
        nb.metadata.pop(key, None)
    nbformat.write(nb, path)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", help="the .ipynb files to strip in place")
    for p in parser.parse_args().notebooks:
        strip(p)
