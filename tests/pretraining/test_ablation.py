"""The ablation runner (experiments/ablation.py): the whole --small run, resuming, the manifest
guard, and the claims' verdicts."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from experiments import ablation, ablation_report
from tests.conftest import REPO


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.ablation", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _record(name, task, sharing="all", e=16, test=(0.7, 0.71, 0.72), heldout=None):
    record = {
        "row": {"name": name, "sentence_task": task, "shared_params": sharing,
                "embedding_size": e},
        "params": 1000,
        "machine": {"cpu": {"model": "test", "flags": ["avx2"]}, "onednn": True},
        "finetune": {
            "test_accuracy": sum(test) / len(test),
            "test_accuracy_se": (
                math.sqrt(sum((t - sum(test) / len(test)) ** 2 for t in test) / (len(test) - 1))
                / math.sqrt(len(test))
            ),
        },
    }  # fmt: skip
    if heldout is not None:
        record["heldout"] = heldout
    return record


def _heldout(mlm, nsp, sop, n=10000):
    return {
        "sop": {"mlm_accuracy": mlm, "sop_accuracy": sop, "num_examples": n,
                "num_masked_tokens": 5 * n},
        "nsp": {"mlm_accuracy": mlm, "nsp_accuracy": nsp, "num_examples": n,
                "num_masked_tokens": 5 * n},
    }  # fmt: skip


def test_claim_verdicts_follow_the_difference_and_its_error():
    budget = ablation.SMALL
    e0 = budget.default_embedding_size
    rows = {
        f"all-shared-E{e0}": _record("a", "sop", test=(0.80, 0.81, 0.82),
                                     heldout=_heldout(0.20, 0.70, 0.75)),
        f"nsp-loss-E{e0}": _record("n", "nsp", test=(0.80, 0.85, 0.75),
                                   heldout=_heldout(0.20, 0.90, 0.50)),
        f"none-loss-E{e0}": _record("z", "none", heldout=_heldout(0.21, 0.50, 0.50)),
        f"random-init-E{e0}": _record("r", None, test=(0.90, 0.91, 0.92)),
    }  # fmt: skip
    by_claim = {c["claim"]: c for c in ablation_report.claims(budget, rows)}
    sop_on_sop = by_claim["an NSP-trained model does not solve SOP (SOP-trained beats it on SOP)"]
    assert sop_on_sop["values"] == pytest.approx([75.0, 50.0])
    assert sop_on_sop["se"] == pytest.approx(
        100 * math.hypot(math.sqrt(0.75 * 0.25 / 1e4), math.sqrt(0.25 / 1e4))
    )
    assert sop_on_sop["verdict"] == "holds"
    # 81 vs 80 with seed errors 0.58 and 2.9: within noise.
    assert by_claim["SOP fine-tunes better than NSP"]["verdict"] == "within noise"
    # Random init is 10 points ahead with small errors: the claim does not hold.
    assert by_claim["pretraining beats random initialization"]["verdict"] == "does not hold"
    # Rows never run say so.
    not_run = [c for c in by_claim.values() if c["table"] in ("Table 3", "Table 4")]
    assert not_run and all(c["verdict"] == "not run yet" for c in not_run)


def test_rows_cover_the_three_tables():
    names = [r.name for r in ablation.rows(ablation.FULL)]
    assert len(names) == len(set(names)) == 13
    e0 = ablation.FULL.default_embedding_size
    for e in ablation.FULL.embedding_sizes:
        assert {f"all-shared-E{e}", f"not-shared-E{e}"} <= set(names)
    assert {f"shared-attention-E{e0}", f"shared-ffn-E{e0}", f"nsp-loss-E{e0}",
            f"none-loss-E{e0}", f"random-init-E{e0}"} <= set(names)  # fmt: skip
    # Every row of a table differs from the others in that table by the ablated setting only.
    rows = ablation.rows(ablation.FULL)
    table5 = [r for r in rows if "table5" in r.tables and r.embedding_size == e0]
    assert sorted(r.sentence_task for r in table5) == ["none", "nsp", "sop"]
    assert {(r.shared_params, r.embedding_size) for r in table5} == {("all", e0)}


@pytest.mark.slow
def test_small_run_end_to_end_resumes_and_guards_its_data(tmp_path):
    work = tmp_path / "work"
    first = _run("--small", "--quiet", "--work", str(work))
    assert first.returncode == 0, first.stderr[-3000:]
    results = work / "results"
    summary = json.loads((results / "results.json").read_text())
    planned = [r.name for r in ablation.rows(ablation.SMALL)]
    assert summary["rows_done"] == sorted(planned)
    for name in planned:
        record = summary["rows"][name]
        runs = record["finetune"]["runs"]
        assert len(runs) == len(ablation.SMALL.finetune_seeds)
        assert all(0.0 <= run["test_accuracy"] <= 1.0 for run in runs)
        if record["row"]["sentence_task"] is None:
            assert "pretrain" not in record
            continue
        assert record["pretrain"]["steps"] == ablation.SMALL.train_steps
        sop, nsp = record["heldout"]["sop"], record["heldout"]["nsp"]
        assert sop["num_examples"] > 0 and nsp["num_examples"] > 0
        assert 0.0 <= sop["sop_accuracy"] <= 1.0 and 0.0 <= nsp["nsp_accuracy"] <= 1.0
    assert len(summary["claims"]) == 10
    table = (results / "table.md").read_text()
    for heading in ("## Table 3", "## Table 4", "## Table 5", "## Claims"):
        assert heading in table
    for plot in ("embedding_size.png", "sharing.png", "sentence_tasks.png", "params.png"):
        assert (results / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A rerun skips every finished row.
    again = _run("--small", "--quiet", "--work", str(work))
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("done earlier") == len(planned)

    # Rows made from other data are not mixed in: the manifest's digests must match.
    manifest = json.loads((results / "manifest.json").read_text())
    manifest["digests"]["spm"] = "0" * 16
    (results / "manifest.json").write_text(json.dumps(manifest))
    refused = _run("--small", "--quiet", "--work", str(work))
    assert refused.returncode != 0
    assert "made with different digests;" in refused.stderr
