"""Paper tables from rows: one line per row spec, best bold and second underlined by the metric's direction,
edit shares from the agents' counts, a curve PNG, a not-run table, provenance and the SYNTHETIC label."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.evaluation.paper_tables import collect, markdown, write_not_run, write_paper_table

CONF = Path(__file__).resolve().parents[2] / "conf"


def _rows() -> list[dict]:
    rows = []
    for method, f1, ssd in (("initial", 0.70, 9.0), ("classical", 0.75, 8.0), ("neurorefiner", 0.80, 7.0)):
        for case, d in (("a", 0.0), ("b", 0.02)):
            row = {"method": method, "protocol": "root_seeded", "segmenter": "unet3d", "case": case,
                   "F1": f1 + d, "SSD": ssd + d, "seconds_method": 1.0}
            if method == "neurorefiner":
                row.update(edits_accepted=3, edits_rejected=1, edits_escalated=0)
            rows.append(row)
    rows.append({**rows[0], "protocol": "full_volume", "F1": 0.99})  # another protocol: not in the table
    return rows


SPECS = [{"label": "U-Net", "method": "initial"}, {"label": "Classical", "method": "classical"},
         {"label": "Ours", "method": "neurorefiner", "marks": {"Inspector": "✓"}, "x": 5},
         {"label": "Missing", "method": "segfix"}]


def test_best_bold_second_underlined_by_direction() -> None:
    s = collect(_rows(), SPECS, "root_seeded", ["SSD", "F1"])
    assert [x["n"] for x in s] == [2, 2, 2, 0]
    md = markdown(s, ["SSD", "F1"], columns=["Inspector"])
    ours = next(line for line in md.splitlines() if "Ours" in line)
    classical = next(line for line in md.splitlines() if "Classical" in line)
    assert "**7.01**" in ours and "**81.00**" in ours and "✓" in ours
    assert "<u>8.01</u>" in classical and "<u>76.00</u>" in classical
    assert "99" not in md


def test_edit_shares_and_per_case_columns() -> None:
    s = collect(_rows(), SPECS, "root_seeded", ["F1"], per_case=["F1"])
    ours = s[2]
    assert ours["share_accepted"] == 0.75 and ours["share_rejected"] == 0.25
    assert ours["F1[a]"] == 0.80 and "edits_accepted" not in s[0]


def _cfg(tmp_path: Path, **table):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="evaluate", overrides=[f"out_dir={tmp_path}", "paths.output_dir=/tmp/nr"])
    OmegaConf.set_struct(cfg, False)
    cfg.table = {"name": "t", "title": "T", "out": str(tmp_path), "protocol": "root_seeded", "rows": SPECS,
                 "metrics": ["SSD", "F1"], "command": "python evaluate.py experiment=t", **table}
    return cfg


class _Ds:
    def __init__(self, name: str) -> None:
        self.name = name


def test_written_files_say_where_they_come_from(tmp_path: Path) -> None:
    paths = write_paper_table(_cfg(tmp_path, curve={"x_label": "T_max", "y": "F1"}), _rows(), _Ds("synthetic_zbfwb"))
    md = paths["md"].read_text()
    assert "SYNTHETIC" in md and "python evaluate.py experiment=t" in md and "commit" in md
    assert "Missing" in md.split("not run")[-1]
    assert "accepted 6 (75.0 %), rejected 2 (25.0 %)" in md and "escalated 0 (0.0 %)" in md
    assert paths["csv"].read_text().startswith("method,label,n,SSD,F1")
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    real = write_paper_table(_cfg(tmp_path), _rows(), _Ds("diadem"))["md"].read_text()
    assert "real data" in real and "SYNTHETIC" not in real


def test_not_run_table_lists_every_row_with_the_reason(tmp_path: Path) -> None:
    md = write_not_run(_cfg(tmp_path), "diadem", "no VLM server at http://x").read_text()
    assert md.count("not run: no VLM server at http://x") == len(SPECS)


def test_editor_calls_that_changed_voxels_are_read_from_the_traces(tmp_path: Path) -> None:
    import json

    from neurorefiner.evaluation.paper_tables import edit_shares, trace_dir

    rows = [{**r, "method_key": "k1", "split": "test"} for r in _rows()]
    trace = trace_dir(tmp_path / "traces", "test", "unet3d", "neurorefiner", "k1")
    trace.mkdir(parents=True)
    recs = [{"role": "editor", "decision": {"added": 3, "removed": 0}},
            {"role": "editor", "decision": {"added": 0, "removed": 0}}, {"role": "validator", "decision": {}}]
    (trace / "a.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    # the same method, key and volume on another segmenter's masks: its own trace, never counted here
    other = trace_dir(tmp_path / "traces", "test", "nnunet_style", "neurorefiner", "k1")
    other.mkdir(parents=True)
    (other / "a.jsonl").write_text("\n".join(json.dumps(recs[0]) for _ in range(5)) + "\n")
    text = edit_shares(collect(rows, SPECS, "root_seeded", ["F1"]), tmp_path / "traces")
    assert "editor calls that changed any voxel: 1 of 2" in text


def test_rows_without_a_server_say_why_beside_the_rows_that_ran(tmp_path: Path) -> None:
    """Table 4 without a VLM server: the initial masks' row runs, the model rows are listed with the reason
    (it used to list every row, the initial one too, as not run)."""
    paths = write_paper_table(_cfg(tmp_path, not_run_reason="no VLM server answered at http://x"), _rows(),
                              _Ds("diadem"))
    md = paths["md"].read_text()
    assert "Rows without results (not run: no VLM server answered at http://x): Missing." in md
    assert "| U-Net |" in md


def test_only_methods_whose_agents_use_a_vlm_need_the_server() -> None:
    from neurorefiner.evaluation.methods import needs_server

    assert not needs_server(OmegaConf.create({"_target_": "initial"}))
    assert not needs_server(OmegaConf.create({"agent": {"backend": "heuristic"}}))
    assert needs_server(OmegaConf.create({"agent": {"backend": "vlm"}}))
    assert needs_server(OmegaConf.create({"agent": {"backend": "heuristic"}, "agent_overrides": {"backend": "vlm"}}))


def test_rows_stand_beside_the_papers_with_the_gain_over_their_initial_masks() -> None:
    from neurorefiner.evaluation.paper_tables import beside_paper

    specs = [{"label": "U-Net", "method": "initial", "segmenter": "unet3d", "paper": {"F1": 74.94}},
             {"label": "Classical", "method": "classical", "segmenter": "unet3d"},
             {"label": "NR", "method": "neurorefiner", "segmenter": "unet3d", "paper": {"F1": 90.07}}]
    rows = [{"method": "initial", "segmenter": "unet3d", "protocol": "p", "case": "a", "F1": 0.70},
            {"method": "classical", "segmenter": "unet3d", "protocol": "p", "case": "a", "F1": 0.80},
            {"method": "neurorefiner", "segmenter": "unet3d", "protocol": "p", "case": "a", "F1": 0.85}]
    text = beside_paper(collect(rows, specs, "p", ["F1"]), specs, ["F1"], "CWMBS weak")
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| Method | n | F1 ours | F1 paper | F1 gain ours | F1 gain paper |"
    assert lines[1] == "| U-Net | 1 | 70.00 | 74.94 |  |  |"
    assert lines[2] == "| NR | 1 | 85.00 | 90.07 | +15.00 | +15.13 |"
    assert len(lines) == 3 and "SYNTHETIC" in text  # a row without paper figures is left out
    assert beside_paper(collect(rows, specs[1:2], "p", ["F1"]), specs[1:2], ["F1"], "x") == ""


def test_the_stand_in_tables_carry_the_papers_rows() -> None:
    from neurorefiner.paths import conf_dir

    for name, f1 in (("table_1_synthetic_cwmbs_weak", 90.07), ("table_1_synthetic_cwmbs_noise", 86.37),
                     ("table_2_synthetic_bigneuron", 90.05), ("table_2_synthetic_zbfwb", 86.13)):
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = compose(config_name="evaluate", overrides=[f"experiment={name}"])
        nr = [r for r in cfg.table.rows if r.method == "neurorefiner" and r.segmenter == "unet3d"]
        assert nr[0].paper.F1 == f1
