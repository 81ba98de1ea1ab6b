"""tools/run_manifest.py: the check that a refactoring left every run (so every cached result) as it was."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("run_manifest", ROOT / "tools" / "run_manifest.py")
run_manifest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_manifest)


def test_a_manifest_against_itself_shows_the_same_runs_and_a_changed_field_is_named():
    m = run_manifest.manifest()
    # the comparison's full runs: 32 rows x 3 seeds, the four w.t. rows' gamma-0 controls and the six
    # Parabolic-/PolyResNets trained normally, x 3 seeds
    assert len(m["cifar_comparison full"]) == 96 + 12 + 18 and len(m["imagenet full TINY=1"]) == 10
    rows = run_manifest.compare(m, m)[2:]
    assert rows and all(r.endswith("| - |") for r in rows)
    assert m["vgg_stability smoke computations"], "computations are in the manifest"
    runs = {k: v for k, v in m.items() if not k.endswith(" computations")}
    changed = {k: {i: dict(key, epochs=key["epochs"] + 1) for i, key in v.items()} for k, v in runs.items()}
    row = next(r for r in run_manifest.compare(m, changed) if r.startswith("| imagenet cpu |"))
    assert row.endswith("| epochs |"), row
