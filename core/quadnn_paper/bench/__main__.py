"""``python -m quadnn_paper.bench``: see :mod:`quadnn_paper.bench.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
