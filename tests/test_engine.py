"""Training engine: CLI, schedules, caching, divergence, transfer, resume after a kill, DDP, CIFAR loader."""

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from runs import small_run

import quadnn_paper.data.cifar as qdata
from quadnn_paper.engine import RunConfig, RunStore, lr_factor, run, stage_ends
from quadnn_paper.engine.tasks import make_task
from quadnn_paper.execution.train import _parser, config_from_args
from quadnn_paper.sections import cifar_tuning

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def tiny(**kw):
    """A seconds-long run: digits, a quarter-width QResNet20, 256 training images."""
    quadratic = dict(model="cifar_qresnet20", train_limit=256, batch_size=64, relinear="sg", lr_g=1e-3, device="auto")
    return small_run(**{**quadratic, **kw})


def run_dir(cfg, out):
    return RunStore(out).dir(cfg)


def curve(result):
    return [(h["train_loss"], h.get("test_loss"), h.get("test_error")) for h in result["history"]]


# -- CLI -------------------------------------------------------------------------------------
def test_help_documents_every_training_flag():
    text = _parser().format_help()
    for flag in (
        "--model",
        "--dataset",
        "--epochs",
        "--batch-size",
        "--optimizer",
        "--lr",
        "--lr-g",
        "--lr-b",
        "--relinear",
        "--alpha-g",
        "--alpha-b",
        "--rezero",
        "--seed",
        "--out",
        "--quadratic-decay",
        "--device",
        "--amp",
        "--compile",
        "--profile",
        "--task",
    ):
        assert flag in text
    assert all(a.help for a in _parser()._actions)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--relinear", "sgd"], "'none', 'sg', 'sw-l1', 'sw-l2'"),
        (["--optimizer", "lion"], "'sgd', 'adam', 'adamw'"),
        (["--profile", "huge"], "'smoke', 'cpu', 'full'"),
        (["--epochs", "0"], "must be >= 1"),
        (["--lr", "-1"], "must be >= 0"),
        (["--lr-decay", "nan"], "not finite"),
        (["--train-limit", "-5"], "must be >= 0"),
        (["--dim-alpha", "0"], "must be > 0"),
        (["--model-kwargs", "[1]"], "must be a JSON object"),
        (["--model-kwargs", "{bad"], "is not JSON"),
        (["--device", "tpu"], "device must be one of"),
        (["--quadratic-decay", "l1"], "'reference', 'zero'"),
    ],
)
def test_bad_flags_name_the_valid_choices(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        config_from_args(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_flags_map_onto_the_config():
    cfg, out = config_from_args(
        [
            "--profile",
            "cpu",
            "--model",
            "cifar_qresnet32",
            "--lr-g",
            "1e-5",
            "--relinear",
            "sw-l2",
            "--alpha-g",
            "0.9",
            "--rezero",
            "--epochs",
            "3",
            "--milestones",
            "0.5",
        ]
    )
    assert (cfg.dataset, cfg.epochs, cfg.model, cfg.lr_g, cfg.relinear, cfg.alpha_g, cfg.rezero, cfg.milestones) == (
        "digits",
        3,
        "cifar_qresnet32",
        1e-5,
        "sw-l2",
        0.9,
        True,
        (0.5,),
    )


def test_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    with pytest.raises(SystemExit) as e:
        config_from_args(["--out", str(tmp_path / "f")])
    assert e.value.code == 2 and "not a directory" in capsys.readouterr().err


def test_unknown_model_lists_ours():
    with pytest.raises(ValueError, match="cifar_qresnet20"):
        make_task(tiny(model="cifar_qresnet21")).build_model()


def test_unknown_model_kwargs_are_named(tmp_path):
    with pytest.raises(ValueError, match="nosuch"):
        make_task(tiny(model_kwargs={"nosuch": 1})).build_model()


# -- schedules -------------------------------------------------------------------------------
def test_multistep_is_the_papers_schedule_at_full_length_and_keeps_its_shape_when_short():
    full = RunConfig(epochs=200)
    lrs = [lr_factor(full, e, 0, 0) for e in range(200)]
    assert lrs[99] == 1 and lrs[100] == pytest.approx(0.1) and lrs[149] == pytest.approx(0.1)
    assert lrs[150] == pytest.approx(0.01) and lrs[199] == pytest.approx(0.01)
    assert stage_ends(full) == [100, 150, 200]
    assert stage_ends(RunConfig(epochs=12)) == [6, 9, 12]


def test_diminishing_and_poly_step_sizes():
    cfg = RunConfig(schedule="diminishing", dim_alpha=100.0)
    assert lr_factor(cfg, 0, 0, 10) == 1 and lr_factor(cfg, 5, 100, 10) == pytest.approx(0.5)
    poly = RunConfig(schedule="poly", lr=1e-4, end_lr=1e-5, lr_power=0.5)
    assert lr_factor(poly, 0, 0, 100) == 1 and lr_factor(poly, 0, 100, 100) == pytest.approx(0.1)
    assert lr_factor(poly, 0, 75, 100) == pytest.approx((0.9e-4 * 0.5 + 1e-5) / 1e-4)


# -- results: cache, divergence ------------------------------------------------------------
def test_finished_config_is_never_rerun(tmp_path, monkeypatch):
    cfg, out = tiny(epochs=1), tmp_path / "runs"
    first = run(cfg, out)
    assert first["status"] == "finished" and len(first["history"]) == 1
    assert first["metrics"] == {k: first[k] for k in ("test_loss", "test_error", "test_images")}
    assert (run_dir(cfg, out) / "result.json").exists() and not (run_dir(cfg, out) / "last.pt").exists()
    monkeypatch.setattr(qdata, "load", lambda *a, **k: pytest.fail("a cached configuration was recomputed"))
    assert run(cfg, out) == first
    # The hash ignores where data and results live and how many threads run... not what is computed.
    assert cfg.run_id == tiny(epochs=1, data_dir="elsewhere", threads=2).run_id
    assert cfg.run_id != tiny(epochs=1, lr_g=1e-4).run_id


def test_quadratic_init_random_starts_from_drawn_terms_and_keeps_older_ids():
    """``quadratic_init="random"`` (training without ReLinear) starts every quadratic term drawn, on
    top of the twin's linear weights; at its default the field stays out of the key, so every run
    stored before it keeps its id."""
    from quadnn import relinear
    from quadnn_paper.engine.loop import _initial_model

    base = tiny(relinear="none", init_twin="cifar_resnet20")
    assert "quadratic_init" not in base.key() and "quadratic_init" in base.replace(quadratic_init="random").key()
    drawn = base.replace(quadratic_init="random")
    ref, rnd = (_initial_model(c, make_task(c)) for c in (base, drawn))
    terms = [
        (p, p2, value)
        for (_, p, _, value), (_, p2, _, _) in zip(relinear.quadratic_terms(ref), relinear.quadratic_terms(rnd))
    ]
    assert all(torch.all(p == value) for p, _, value in terms)  # ReLinear's start
    assert all(not torch.all(p2 == value) for _, p2, value in terms if p2.numel() > 1)
    lin = [n for n, _ in ref.named_parameters() if n.rsplit(".", 1)[-1] in ("weight", "bias")]
    assert all(torch.equal(ref.get_parameter(n), rnd.get_parameter(n)) for n in lin)  # the same twin
    with pytest.raises(ValueError, match=r"quadratic_init must be one of \('reference', 'random'\)"):
        tiny(quadratic_init="kaiming")


def test_divergence_is_recorded_not_raised(tmp_path):
    cfg, out = tiny(relinear="none", lr=1e4, epochs=3), tmp_path / "runs"
    res = run(cfg, out)
    assert res["status"] == "diverged" and res["test_error"] is None and res["metrics"] == {}
    assert res["history"] and res["epochs_run"] < 3
    assert "10 ln(10)" in res["diverged_reason"] or "non-finite" in res["diverged_reason"]
    assert json.loads((run_dir(cfg, out) / "result.json").read_text())["status"] == "diverged"
    # A sane neighbour in the same sweep still trains.
    assert run(tiny(epochs=1), out)["status"] == "finished"


def test_weight_transfer_is_a_declared_dependency_resolved_by_hash(tmp_path):
    out = tmp_path / "runs"
    source = tiny(model="cifar_resnet20", relinear="none", epochs=4)
    cfg = tiny(transfer_from=source, transfer_stage=1)
    assert cfg.dependencies() == [source] and cfg.run_id != tiny().run_id
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    res = run(cfg, out)  # trains the source first (inline)
    conv = run(source, out)
    assert sorted(conv["stage_checkpoints"]) == ["1", "2", "3"] and conv["stage_checkpoints"]["1"] == "stage1.pt"
    assert res["status"] == "finished"
    # Only the conventional source keeps its stage weights: no transfer starts from a quadratic run.
    assert res["stage_checkpoints"] == {} and not list(run_dir(cfg, out).glob("stage*.pt"))
    assert sorted(p.name for p in run_dir(source, out).glob("stage*.pt")) == ["stage1.pt", "stage2.pt", "stage3.pt"]
    # The quadratic network starts as the conventional one at the end of its stage 1.
    task = make_task(cfg)
    q, c = task.build_model(), task.build_model(source)
    from quadnn_paper.engine.loop import _transfer

    _transfer(cfg, RunStore(out), q, task, run_dependencies=False)
    ck = RunStore(out).load_checkpoint(source, "stage1.pt")
    assert ck["epoch"] == 2
    c.load_state_dict(ck["model"])
    x = torch.randn(5, 1, 8, 8)
    torch.testing.assert_close(q.eval()(x), c.eval()(x), rtol=1e-5, atol=1e-5)


def test_every_epoch_but_the_last_is_checkpointed(tmp_path, monkeypatch):
    """The last epoch's result is written at once and its folder keeps no ``last.pt``: one written
    after that epoch would only double the disk the run takes at its end."""
    monkeypatch.setenv("QUADNN_FAULT_LOG", str(tmp_path / "ops"))  # common.files logs each operation
    cfg, out = tiny(epochs=3), tmp_path / "runs"
    assert run(cfg, out)["epochs_run"] == 3
    ops = (tmp_path / "ops").read_text().splitlines()
    assert sum(op.startswith("rename ") and op.endswith("/last.pt") for op in ops) == 2
    assert ops[-1].startswith("rename ") and ops[-1].endswith("/result.json")
    assert not (run_dir(cfg, out) / "last.pt").exists()


def test_a_transfer_from_a_quadratic_network_is_refused_by_name(tmp_path):
    """Quadratic runs keep no stage weights (they would fill the disk), so none can be a source."""
    source = tiny(epochs=1)
    cfg = tiny(transfer_from=source, seed=1)
    with pytest.raises(ValueError, match=f"conventional network; source {source.run_id} \\(cifar_qresnet20\\)"):
        run(cfg, tmp_path)
    assert run(source, tmp_path)["stage_checkpoints"] == {}


def test_dependent_run_without_its_source_says_so(tmp_path):
    from quadnn_paper.engine import DependencyNotReady

    cfg = tiny(transfer_from=tiny(model="cifar_resnet20", relinear="none"))
    with pytest.raises(DependencyNotReady, match=cfg.transfer_from.run_id):
        run(cfg, tmp_path, run_dependencies=False)


def test_relocated_cache_reads_its_own_checkpoints(tmp_path):
    source = tiny(model="cifar_resnet20", relinear="none", epochs=2)
    cfg = tiny(transfer_from=source, epochs=1)
    run(source, tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "b")
    res = run(cfg, tmp_path / "b", run_dependencies=False)  # finds the source under the moved cache
    assert res["status"] == "finished" and "/a/" not in json.dumps(res)


# -- resume after kill -----------------------------------------------------------------------
@pytest.mark.slow  # a subprocess or two: seconds each
def test_killed_run_resumes_to_the_same_numbers(tmp_path):
    cfg, out = tiny(epochs=4, train_limit=512), tmp_path / "runs"
    code = f"from quadnn_paper.engine import RunConfig, run; run(RunConfig(**{asdict(cfg)!r}), {str(out)!r})"
    proc = subprocess.Popen([PY, "-c", code], cwd=tmp_path)
    metrics = run_dir(cfg, out) / "metrics.json"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and len(json.loads(metrics.read_text())) >= 1:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run_dir(cfg, out) / "result.json").exists(), "the run finished before it could be killed"
    assert (run_dir(cfg, out) / "last.pt").exists()
    done_before = torch.load(run_dir(cfg, out) / "last.pt", weights_only=True)["epoch"]
    assert 1 <= done_before < 4
    resumed = run(cfg, out)
    fresh = run(cfg, tmp_path / "fresh")
    assert resumed["status"] == fresh["status"] == "finished"
    assert curve(resumed) == curve(fresh)  # bitwise equal on CPU


# -- DDP ----------------------------------------------------------------------------------------
@pytest.mark.slow  # a subprocess or two: seconds each
def test_ddp_two_processes_match_one_process_with_the_same_global_batch(tmp_path):
    args = [
        "--model",
        "cifar_resnet20",
        "--width",
        "0.25",
        "--dataset",
        "digits",
        "--train-limit",
        "384",
        "--epochs",
        "2",
        "--batch-size",
        "96",
        "--lr",
        "0.02",
        "--relinear",
        "none",
        "--threads",
        "1",
        "--no-progress",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = Path(PY).with_name("torchrun")
    with socket.socket() as sock:  # a free port, so concurrent test runs do not collide
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run(
        [
            str(torchrun),
            "--nproc_per_node=2",
            "--master_port",
            str(port),
            "-m",
            "quadnn_paper.execution.train",
            *args,
            "--out",
            str(tmp_path / "ddp"),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    subprocess.run(
        [PY, "-m", "quadnn_paper.execution.train", *args, "--out", str(tmp_path / "one")],
        check=True,
        env=env,
        capture_output=True,
    )
    (ddp,) = [json.loads(p.read_text()) for p in (tmp_path / "ddp").glob("*/result.json")]
    (one,) = [json.loads(p.read_text()) for p in (tmp_path / "one").glob("*/result.json")]
    assert ddp["world_size"] == 2 and one["world_size"] == 1
    for a, b in zip(ddp["history"], one["history"]):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
        assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-3)
    last = max(ddp["stage_checkpoints"])
    wa = torch.load(tmp_path / "ddp" / ddp["run_id"] / ddp["stage_checkpoints"][last], weights_only=True)["model"]
    wb = torch.load(tmp_path / "one" / one["run_id"] / one["stage_checkpoints"][last], weights_only=True)["model"]
    for k in wa:
        torch.testing.assert_close(wa[k].double(), wb[k].double(), rtol=1e-3, atol=1e-4)


# -- CIFAR loader on fake data in torchvision's format ---------------------------------------------
def write_fake_cifar10(root: Path, n=16):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        d = {
            b"batch_label": name.encode(),
            b"labels": rng.integers(0, 10, n).tolist(),
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [b"x.png"] * n,
        }
        with open(folder / name, "wb") as f:
            pickle.dump(d, f)
    return folder


def test_cifar_loader_reads_torchvision_format_and_augments(tmp_path):
    folder = write_fake_cifar10(tmp_path)
    data = qdata.load("cifar10", tmp_path)
    assert data.x_train.shape == (80, 3, 32, 32) and data.x_test.shape == (16, 3, 32, 32)
    with open(folder / "data_batch_1", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    assert torch.equal(data.x_train[0], torch.from_numpy(raw[b"data"][0].reshape(3, 32, 32)))
    assert data.y_train[:16].tolist() == raw[b"labels"]
    x = qdata.augment(data, data.x_train[:8], torch.Generator().manual_seed(0))
    assert x.shape == (8, 3, 32, 32) and x.dtype == torch.float32
    same = qdata.augment(data, data.x_train[:8], torch.Generator().manual_seed(0))
    assert torch.equal(x, same)
    res = run(tiny(dataset="cifar10", data_dir=str(tmp_path), epochs=1, batch_size=32, train_limit=0), tmp_path / "r")
    assert res["status"] == "finished" and res["params"] > 0


def test_missing_cifar_says_where_and_how(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"cifar-10-batches-py.*tar xzf"):
        qdata.load("cifar10", tmp_path)


# -- the section's protocol table -------------------------------------------------------------
def test_full_protocol_is_the_papers():
    full = cifar_tuning.PROTOCOLS["full"]
    assert full["dataset"] == "cifar10" and full["model"] == "cifar_qresnet20" and full["width"] == 1.0
    assert full["conventional"] == "cifar_resnet20"
    assert (full["epochs"], full["batch_size"], full["lr"], tuple(full["milestones"])) == (200, 128, 0.1, (0.5, 0.75))
    assert full["train_limit"] == 0 and full["grid"] == "all" and len(full["seeds"]) >= 2  # intervals at full
    assert cifar_tuning.GRIDS["sg"] == [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    assert cifar_tuning.GRIDS["sw-l1"] == [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    assert cifar_tuning.GRIDS["sw-l2"] == [0.1, 0.5, 0.9, 0.99]
    assert cifar_tuning.GRIDS["transfer"] == [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    assert cifar_tuning.GRIDS["rezero"] == [1e-1, 1e-2, 1e-3, 1e-4]
    assert stage_ends(RunConfig(epochs=full["epochs"], milestones=full["milestones"])) == [100, 150, 200]
    for profile, proto in cifar_tuning.PROTOCOLS.items():
        assert set(proto) == set(full), profile


# -- reading data never executes it -----------------------------------------------------------------
class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_crafted_cifar_batch_does_not_run_code(tmp_path):
    folder = write_fake_cifar10(tmp_path)
    marker = tmp_path / "pwned"
    with open(folder / "data_batch_1", "wb") as f:
        pickle.dump({b"data": _Exploit(marker), b"labels": [0]}, f)
    with pytest.raises(qdata.UnsafePickle, match=r"data_batch_1.*posix.system|data_batch_1.*os.system"):
        qdata.load("cifar10", tmp_path)
    assert not marker.exists()


def test_truncated_cifar_batch_names_the_file(tmp_path):
    folder = write_fake_cifar10(tmp_path)
    blob = (folder / "test_batch").read_bytes()
    (folder / "test_batch").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="test_batch: not a readable CIFAR batch"):
        qdata.load("cifar10", tmp_path)


def test_cifar100_pickles_read_with_numpy_arrays_inside(tmp_path):
    from quadnn_paper.data.tiny import write_cifar

    write_cifar(tmp_path, "cifar100", n_train=20, n_test=10)
    data = qdata.load("cifar100", tmp_path)
    assert data.num_classes == 100 and data.x_train.shape == (20, 3, 32, 32)


def test_transfer_from_a_source_that_did_not_converge_is_recorded_not_retried(tmp_path):
    source = tiny(model="cifar_resnet20", relinear="none", lr=1e4, epochs=3)
    cfg = tiny(transfer_from=source)
    res = run(cfg, tmp_path)
    assert run(source, tmp_path)["status"] == "diverged"
    assert res["status"] == "diverged" and res["epochs_run"] == 0 and res["test_error"] is None
    assert "did not converge" in res["diverged_reason"] and source.run_id in res["diverged_reason"]
    assert (RunStore(tmp_path).dir(cfg) / "result.json").exists()  # a result: not submitted again
