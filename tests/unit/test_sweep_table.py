"""One table for a Hydra multirun of evaluate.py (neurorefiner.evaluation.sweep): rows labelled by the job
overrides that differ, a failed or unstarted job listed as missing, two settings of one method never averaged
together; the callback records jobs only in a multirun."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from neurorefiner.evaluation import sweep
from neurorefiner.evaluation.tables import label_methods, markdown_table, summarize

COMMON = ["dataset=tiny", "methods=[initial,classical]"]


def _row(method: str, key: str, f1: float, case: str = "c0", protocol: str = "root_seeded") -> dict:
    return {"dataset": "tiny", "split": "test", "case": case, "method": method, "protocol": protocol,
            "segmenter": "otsu", "SD": 1.0, "SSD": 2.0, "PRE": f1, "REC": f1, "F1": f1, "MES": f1,
            "method_key": key}


def _job(tmp: Path, num: int, overrides: list[str], status: str = "completed", rows=(), error=None) -> dict:
    path = sweep.write_job_manifest(tmp / f"{num}_job", num=num, overrides=overrides, status=status, rows=rows,
                                    error=error)
    return json.loads(path.read_text())


def test_labels_are_the_overrides_that_differ() -> None:
    jobs = {0: [*COMMON, "method_registry.neurorefiner.t_max=1"], 1: [*COMMON, "method_registry.neurorefiner.t_max=3"]}
    assert sweep.job_labels(jobs) == {0: "method_registry.neurorefiner.t_max=1",
                                      1: "method_registry.neurorefiner.t_max=3"}
    two = {0: ["a=1", "b=x"], 1: ["a=1", "b=y"], 2: ["a=2", "b=y"]}
    assert sweep.job_labels(two) == {0: "a=1, b=x", 1: "a=1, b=y", 2: "a=2, b=y"}
    same = {0: ["a=1"], 1: ["a=1"]}  # never one label for two jobs
    assert sweep.job_labels(same) == {0: "job 0", 1: "job 1"}


def test_merge_keeps_two_settings_of_one_method_apart(tmp_path: Path) -> None:
    manifests = [
        _job(tmp_path, 0, [*COMMON, "method_registry.classical.max_gap=5"],
             rows=[_row("initial", "i0", 0.5), _row("classical", "k5", 0.6), _row("classical", "k5", 0.8, "c1")]),
        _job(tmp_path, 1, [*COMMON, "method_registry.classical.max_gap=10"],
             rows=[_row("initial", "i0", 0.5), _row("classical", "k10", 0.2), _row("classical", "k10", 0.4, "c1")]),
    ]
    merged = sweep.merge(manifests)
    by_label = {s[sweep.GROUP]: s for s in merged["summary"]}
    a = by_label["classical (root_seeded) · method_registry.classical.max_gap=5"]
    b = by_label["classical (root_seeded) · method_registry.classical.max_gap=10"]
    assert (a["n"], b["n"]) == (2, 2)
    assert a["F1"] == pytest.approx(0.7) and b["F1"] == pytest.approx(0.3)  # each its own, never 0.5
    assert (a["method_key"], b["method_key"]) == ("k5", "k10")
    assert merged["keys"] == ["method_registry.classical.max_gap"] and not merged["missing"]
    paths = sweep.write_merged(tmp_path, merged, command="python evaluate.py -m ...")
    md = paths["md"].read_text()
    assert "| classical (root_seeded) · method_registry.classical.max_gap=10 | 2 |" in md
    assert "0 missing" in md and "SYNTHETIC" in md
    per_volume = list(csv.DictReader(open(paths["per_volume"])))
    assert len(per_volume) == 6 and {r["overrides"] for r in per_volume} == {
        "method_registry.classical.max_gap=5", "method_registry.classical.max_gap=10"}
    assert [r["job"] for r in csv.DictReader(open(paths["csv"]))] == ["0", "0", "1", "1"]


def test_failed_running_and_unstarted_jobs_are_listed_missing(tmp_path: Path) -> None:
    plan = [[*COMMON, f"method_registry.classical.max_gap={g}"] for g in (5, 10, 20, 40)]
    sweep.write_plan(tmp_path, plan, "python evaluate.py -m method_registry.classical.max_gap=5,10,20,40")
    _job(tmp_path, 0, plan[0], rows=[_row("classical", "k5", 0.6)])
    _job(tmp_path, 1, plan[1], status="failed", error="TypeError: boom")
    _job(tmp_path, 2, plan[2], status="running")  # killed, or it exited (sys.exit) before its end
    # job 3 never started; a manifest left by another sweep under the same number is not it
    _job(tmp_path / "old", 3, [*COMMON, "method_registry.classical.max_gap=99"], rows=[_row("classical", "x", 1.0)])
    paths, md = sweep.merge_sweep(tmp_path)
    assert "4 job(s), 1 with results, 3 missing" in md
    assert "| MISSING (failed) · method_registry.classical.max_gap=10 | 0 |" in md
    assert "failed: TypeError: boom" in md
    assert "| MISSING (running) · method_registry.classical.max_gap=20 | 0 |" in md
    assert "| MISSING (not started) · method_registry.classical.max_gap=40 | 0 |" in md
    assert "max_gap=99" not in md
    rows = list(csv.DictReader(open(paths["csv"])))
    assert [(r["job"], r["status"]) for r in rows] == [("0", "completed"), ("1", "failed"), ("2", "running"),
                                                      ("3", "not started")]


def test_label_methods_and_summarize_never_average_two_settings() -> None:
    rows = [_row("classical", "k5", 0.6), _row("classical", "k10", 0.2), _row("initial", "i0", 0.5)]
    with pytest.raises(ValueError, match="different method settings"):
        summarize(rows, group="method")
    label_methods(rows)
    assert [r["method_protocol"] for r in rows] == [
        "classical[k5] (root_seeded)", "classical[k10] (root_seeded)", "initial (root_seeded)"]
    table = markdown_table(summarize(rows, group="method_protocol"), group="method_protocol")
    assert "| classical[k5] (root_seeded) | 1 |" in table and "| initial (root_seeded) | 1 |" in table
    # one setting per name: the labels a plain run has always written
    single = label_methods([_row("classical", "k5", 0.6), _row("classical", "k5", 0.7, "c1")])
    assert {r["method_protocol"] for r in single} == {"classical (root_seeded)"}


def _hydra_cfg(tmp_path: Path, mode: str, num: int, overrides: list[str]):  # type: ignore[no-untyped-def]
    from hydra.types import RunMode

    return OmegaConf.create({
        "out_dir": str(tmp_path / f"job{num}" / "out"),
        "hydra": {"mode": RunMode[mode], "sweep": {"dir": str(tmp_path / "sweep")},
                  "runtime": {"output_dir": str(tmp_path / "sweep" / f"{num}_tiny")}, "job": {"num": num},
                  "overrides": {"task": overrides},
                  "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
                              "params": None}}})


def test_callback_records_jobs_in_a_multirun_only(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from hydra.core.utils import JobReturn, JobStatus

    cb = sweep.SweepTable(print_table=False)
    plain = _hydra_cfg(tmp_path, "RUN", 0, ["dataset=tiny"])
    cb.on_job_start(config=plain, task_function=None)
    cb.on_job_end(config=plain, job_return=JobReturn(status=JobStatus.COMPLETED, _return_value=[_row("a", "k", 1)]))
    assert not (tmp_path / "sweep").exists()  # a plain run writes nothing more

    start = _hydra_cfg(tmp_path, "MULTIRUN", 0, ["dataset=tiny", "method_registry.classical.max_gap=5,10"])
    cb.on_multirun_start(config=start)
    plan = json.loads((tmp_path / "sweep" / sweep.PLAN).read_text())["jobs"]
    assert [j[-1] for j in plan] == ["method_registry.classical.max_gap=5", "method_registry.classical.max_gap=10"]
    ok, bad = (_hydra_cfg(tmp_path, "MULTIRUN", i, job) for i, job in enumerate(plan))
    cb.on_job_start(config=ok, task_function=None)
    cb.on_job_end(config=ok, job_return=JobReturn(status=JobStatus.COMPLETED,
                                                  _return_value=[_row("classical", "k5", 0.6)]))
    cb.on_job_start(config=bad, task_function=None)
    cb.on_job_end(config=bad, job_return=JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("no APP2")))
    md = (tmp_path / "sweep" / sweep.TABLE_MD).read_text()  # already there without on_multirun_end
    assert "| classical (root_seeded) · method_registry.classical.max_gap=5 | 1 |" in md
    assert "MISSING (failed) · method_registry.classical.max_gap=10" in md and "RuntimeError: no APP2" in md
    cb.on_multirun_end(config=start)
    assert f"merged table of the whole sweep: {tmp_path / 'sweep' / sweep.TABLE_MD}" in capsys.readouterr().out
