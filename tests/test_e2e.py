"""What `make test-e2e` leaves behind: every section of the full profile at TINY=1 ran through the
real SLURM from an empty cache, and the report was built from it with nothing pending. Run by
`make test-e2e` after its second pass, with QUADNN_E2E_DIR naming its fresh clone."""

import json
import os
from pathlib import Path

import pytest

E2E = Path(os.environ["QUADNN_E2E_DIR"]) if os.environ.get("QUADNN_E2E_DIR") else None
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(E2E is None, reason="checks the output of `make test-e2e` (QUADNN_E2E_DIR unset)"),
]


def notebooks():
    return sorted(p.stem for p in (E2E / "notebooks").glob("*.ipynb"))


def test_every_section_is_stamped_with_the_full_profile_at_tiny():
    for name in notebooks():
        stamp = json.loads((E2E / "paper" / ".stamps" / f"{name}.json").read_text())
        assert stamp["profile"] == "full", (name, stamp["profile"])
        assert "TINY=1" in stamp["data"], (name, stamp["data"])


def test_nothing_is_pending():
    assert not list((E2E / "build").rglob("*.pending"))
    for table in (E2E / "paper" / "tables").glob("*.csv"):
        assert "pending" not in table.read_text(), table.name


def test_every_run_went_through_slurm_once_and_finished():
    records = [json.loads(p.read_text()) for p in (E2E / "build" / "cache" / "runs" / ".jobs").glob("*/*.json")]
    assert len(records) > 100  # the CIFAR, VGG, ImageNet and KITTI sections' runs
    for record in records:
        assert record["runner"] == "slurm" and record["job_id"], record
        result = json.loads((E2E / "build" / "cache" / "runs" / record["key"] / "result.json").read_text())
        assert result["status"] in ("finished", "diverged"), (record["key"], result["status"])


def test_the_report_is_built_from_these_outputs():
    pdf = E2E / "paper" / "main.pdf"
    stamps = list((E2E / "paper" / ".stamps").glob("*.json"))
    assert pdf.stat().st_size > 10_000
    assert pdf.stat().st_mtime >= max(p.stat().st_mtime for p in stamps)
