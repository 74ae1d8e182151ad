"""The ablation's report: results JSON, a Markdown table beside the paper's numbers, the claims
with their verdicts, and PNG plots, from the finished rows under a results directory.

A claim compares two measured numbers in the direction the paper found. With d their difference
(in the paper's direction) and s the standard error of d (the rows' errors added in quadrature):
"holds" when d > 2s, "does not hold" when d < -2s, "within noise" otherwise. Fine-tuning errors
are standard errors of the mean over seeds (the test split is the same for every row);
held-out accuracies have binomial errors over the held-out instances. The claims were written
down before any row ran.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from albert_tf.io_utils import atomic_file

PAPER = json.loads((Path(__file__).resolve().parent / "paper_tables.json").read_text())
SHARING_NAMES = {"all": "all-shared", "none": "not-shared", "attention": "shared-attention",
                 "ffn": "shared-FFN"}  # fmt: skip
TASK_NAMES = {"none": "None", "nsp": "NSP", "sop": "SOP"}


def load_rows(results: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((results / "rows").glob("*.json"))}


# === Measures ===


def finetune_acc(record: dict) -> tuple[float, float]:
    f = record["finetune"]
    return 100 * f["test_accuracy"], 100 * f["test_accuracy_se"]


def heldout_acc(record: dict, data: str, metric: str) -> tuple[float, float]:
    """`metric` (mlm, nsp or sop) accuracy in % on the held-out `data` (sop or nsp) and its
    binomial standard error (for MLM over masked tokens, which are not independent: a lower
    bound)."""
    scores = record["heldout"][data]
    p = scores[f"{metric}_accuracy"]
    n = scores["num_masked_tokens"] if metric == "mlm" else scores["num_examples"]
    return 100 * p, 100 * math.sqrt(p * (1 - p) / n)


def mlm_acc(record: dict) -> tuple[float, float]:
    return heldout_acc(record, "sop", "mlm")


def panels(budget) -> tuple:
    """The two panels of the E and sharing plots: (title, measure)."""
    return (
        (f"{budget.task_title} test accuracy (%)", finetune_acc),
        ("held-out MLM accuracy (%)", mlm_acc),
    )


def _fmt(value: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    mean, se = value
    return f"{mean:.1f}" if math.isnan(se) else f"{mean:.1f} ± {se:.1f}"


# === Claims ===


def claims(budget, by_name: dict[str, dict]) -> list[dict]:
    """The paper's claims as comparisons of two rows (see the module docstring)."""
    e0, es = budget.default_embedding_size, budget.embedding_sizes
    rt = (f"{budget.task_title} test accuracy", finetune_acc)

    def held(data, metric):
        return (f"held-out {metric.upper()} accuracy", lambda r: heldout_acc(r, data, metric))

    specs = [
        ("Table 3", f"not-shared: the largest E (E={es[-1]}) beats the smallest (E={es[0]})",
         rt, f"not-shared-E{es[-1]}", f"not-shared-E{es[0]}",
         "SST-2 92.8 vs 91.5; Avg 82.3 vs 81.3"),
        ("Table 3", f"all-shared: E=H (E={es[-1]}) is no better than E={e0}",
         rt, f"all-shared-E{e0}", f"all-shared-E{es[-1]}",
         "Avg 80.1 (E=128) vs 79.8 (E=768); SST-2 90.3 vs 90.6"),
        ("Table 4", "sharing all parameters costs accuracy (not-shared beats all-shared)",
         rt, f"not-shared-E{e0}", f"all-shared-E{e0}", "SST-2 91.5 vs 90.3; Avg 81.6 vs 80.1"),
        ("Table 4", "sharing the FFN hurts more than sharing attention",
         rt, f"shared-attention-E{e0}", f"shared-ffn-E{e0}", "SST-2 91.9 vs 91.7; Avg 81.7 vs 80.2"),
        ("Table 5", "an NSP-trained model does not solve SOP (SOP-trained beats it on SOP)",
         held("sop", "sop"), f"all-shared-E{e0}", f"nsp-loss-E{e0}", "SOP 86.5 vs 52.0"),
        ("Table 5", "an SOP-trained model solves NSP to a good degree (beats no sentence loss)",
         held("nsp", "nsp"), f"all-shared-E{e0}", f"none-loss-E{e0}", "NSP 78.9 vs 52.4"),
        ("Table 5", "an NSP-trained model solves NSP (beats no sentence loss)",
         held("nsp", "nsp"), f"nsp-loss-E{e0}", f"none-loss-E{e0}", "NSP 90.5 vs 52.4"),
        ("Table 5", "SOP fine-tunes better than NSP",
         rt, f"all-shared-E{e0}", f"nsp-loss-E{e0}",
         "Avg 80.1 vs 79.2; but SST-2 90.3 vs 91.1 (NSP ahead)"),
        ("Table 5", "a sentence loss costs MLM accuracy (none beats SOP on MLM)",
         held("sop", "mlm"), f"none-loss-E{e0}", f"all-shared-E{e0}", "MLM 54.9 vs 54.0"),
        ("(ours)", "pretraining beats random initialization",
         rt, f"all-shared-E{e0}", f"random-init-E{e0}", "-"),
    ]  # fmt: skip
    out = []
    for table, text, (metric, measure), a, b, paper in specs:
        claim = {"table": table, "claim": text, "metric": metric, "rows": [a, b], "paper": paper}
        if a in by_name and b in by_name:
            (ma, sa), (mb, sb) = measure(by_name[a]), measure(by_name[b])
            diff, se = ma - mb, math.hypot(sa, sb)
            if math.isnan(se):
                verdict = "no error estimate"
            elif diff > 2 * se:
                verdict = "holds"
            elif diff < -2 * se:
                verdict = "does not hold"
            else:
                verdict = "within noise"
            claim.update(values=[ma, mb], difference=diff, se=se, verdict=verdict)
        else:
            claim["verdict"] = "not run yet"
        out.append(claim)
    return out


# === Tables ===


def _params(record: dict) -> str:
    return f"{record['params'] / 1e6:.2f}M"


def markdown(budget, by_name: dict[str, dict], claim_list: list[dict]) -> str:
    e0, es, h = budget.default_embedding_size, budget.embedding_sizes, budget.model["hidden_size"]
    task = budget.task_title
    lines = [
        f"# ALBERT's ablations at small scale ({budget.name} run)",
        "",
        f"Model: H={h}, {budget.model['num_hidden_layers']} layers, "
        f"{budget.model['num_attention_heads']} heads, FFN {budget.model['intermediate_size']}, "
        f"vocab {budget.model['vocab_size']}; {budget.train_steps} steps x {budget.batch_size} x "
        f"{budget.seq_length} tokens per row on `{budget.corpus}`. Fine-tuning: "
        f"{len(budget.finetune_seeds)} seeds, {budget.finetune_epochs} epochs at "
        f"{budget.finetune_learning_rate}. Accuracies in %, ± one standard error. Paper: "
        "ALBERT-base (H=768), SST-2 dev accuracy and the average over five tasks.",
        "",
        "## Table 3: embedding size",
        "",
        f"| sharing | E (E/H) | params | {task} test | held-out MLM | paper E (E/H) | paper params | "
        "paper SST-2 | paper Avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for sharing in ("none", "all"):
        paper_rows = [r for r in PAPER["table3"] if r["shared_params"] == sharing]
        for e, paper in zip(es, paper_rows, strict=False):
            rec = by_name.get(f"{SHARING_NAMES[sharing]}-E{e}")
            lines.append(
                f"| {SHARING_NAMES[sharing]} | {e} ({e / h:.3g}) | "
                f"{_params(rec) if rec else '-'} | {_fmt(finetune_acc(rec) if rec else None)} | "
                f"{_fmt(mlm_acc(rec) if rec else None)} | "
                f"{paper['E']} ({paper['E'] / 768:.3g}) | {paper['params']} | {paper['SST-2']} | "
                f"{paper['Avg']} |"
            )
    lines += [
        "",
        f"## Table 4: what is shared (E={e0}; paper E=128)",
        "",
        f"| sharing | params | {task} test | held-out MLM | paper params | paper SST-2 | paper Avg |",
        "|---|---|---|---|---|---|---|",
    ]
    for paper in PAPER["table4"]:
        name = SHARING_NAMES[paper["shared_params"]]
        rec = by_name.get(f"{name.replace('FFN', 'ffn')}-E{e0}")
        lines.append(
            f"| {name} | {_params(rec) if rec else '-'} | "
            f"{_fmt(finetune_acc(rec) if rec else None)} | "
            f"{_fmt(mlm_acc(rec) if rec else None)} | {paper['params']} | "
            f"{paper['SST-2']} | {paper['Avg']} |"
        )
    lines += [
        "",
        f"## Table 5: sentence-prediction loss (all-shared, E={e0})",
        "",
        f"| trained with | MLM | NSP | SOP | {task} test | paper MLM | paper NSP | paper SOP | "
        "paper SST-2 | paper Avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for paper in PAPER["table5"]:
        task = paper["sentence_task"]
        rec = by_name.get(f"all-shared-E{e0}" if task == "sop" else f"{task}-loss-E{e0}")
        ours = (
            [mlm_acc(rec), heldout_acc(rec, "nsp", "nsp")]
            + [heldout_acc(rec, "sop", "sop"), finetune_acc(rec)]
            if rec
            else [None] * 4
        )
        lines.append(
            f"| {TASK_NAMES[task]} | "
            + " | ".join(_fmt(v) for v in ours)
            + f" | {paper['MLM']} | {paper['NSP']} | {paper['SOP']} | {paper['SST-2']} | "
            f"{paper['Avg']} |"
        )
    random_row = by_name.get(f"random-init-E{e0}")
    if random_row:
        lines += ["", f"Random initialization, fine-tuned the same way: {task} test "
                  f"{_fmt(finetune_acc(random_row))}."]  # fmt: skip
    lines += [
        "",
        "## Claims",
        "",
        "| table | claim | metric | ours (a vs b) | difference ± SE | paper | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in claim_list:
        if "values" in c:
            ours = f"{c['values'][0]:.1f} vs {c['values'][1]:.1f}"
            diff = f"{c['difference']:+.1f} ± {c['se']:.1f}"
        else:
            ours = diff = "-"
        lines.append(
            f"| {c['table']} | {c['claim']} | {c['metric']} | {ours} | {diff} | {c['paper']} | "
            f"**{c['verdict']}** |"
        )
    cpus = sorted(
        {
            f"{r['machine']['cpu']['model']} ({', '.join(r['machine']['cpu']['flags'])}), "
            f"oneDNN {'on' if r['machine']['onednn'] else 'off'}"
            for r in by_name.values()
        }
    )
    lines += ["", f"Rows ran on: {'; '.join(cpus) if cpus else '-'}.", ""]
    return "\n".join(lines)


# === Plots ===


def plots(results: Path, budget, by_name: dict[str, dict]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    e0, es = budget.default_embedding_size, budget.embedding_sizes

    def save(fig, name):
        fig.tight_layout()
        path = results / name
        with atomic_file(path) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
        plt.close(fig)
        written.append(path)

    # Accuracy against E, shared and not shared.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for sharing in ("all", "none"):
        recs = [(e, by_name.get(f"{SHARING_NAMES[sharing]}-E{e}")) for e in es]
        recs = [(e, r) for e, r in recs if r]
        if not recs:
            continue
        for ax, (_, measure) in zip(axes, panels(budget), strict=True):
            values = [measure(r) for _, r in recs]
            ax.errorbar(
                [e for e, _ in recs],
                [v[0] for v in values],
                yerr=[0 if math.isnan(v[1]) else v[1] for v in values],
                marker="o",
                capsize=3,
                label=SHARING_NAMES[sharing],
            )
    for ax, (title, _) in zip(axes, panels(budget), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(es), [str(e) for e in es])
        ax.set_xlabel("embedding size E")
        ax.set_title(title)
        ax.legend()
    save(fig, "embedding_size.png")

    # Accuracy per sharing mode at the default E.
    modes = [m for m in ("all", "attention", "ffn", "none")
             if f"{SHARING_NAMES[m].replace('FFN', 'ffn')}-E{e0}" in by_name]  # fmt: skip
    if modes:
        recs = [by_name[f"{SHARING_NAMES[m].replace('FFN', 'ffn')}-E{e0}"] for m in modes]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        labels = [f"{SHARING_NAMES[m]}\n{_params(r)}" for m, r in zip(modes, recs, strict=True)]
        for ax, (title, measure) in zip(axes, panels(budget), strict=True):
            values = [measure(r) for r in recs]
            ax.bar(labels, [v[0] for v in values],
                   yerr=[0 if math.isnan(v[1]) else v[1] for v in values], capsize=4)  # fmt: skip
            low = min(v[0] for v in values)
            ax.set_ylim(max(0, low - 5), None)
            ax.set_title(f"{title}, E={e0}")
        save(fig, "sharing.png")

    # The MLM / NSP / SOP matrix, ours beside the paper's.
    tasks = [t for t in ("none", "nsp", "sop")
             if (f"all-shared-E{e0}" if t == "sop" else f"{t}-loss-E{e0}") in by_name]  # fmt: skip
    if tasks:
        ours = [
            [
                heldout_acc(by_name[f"all-shared-E{e0}" if t == "sop" else f"{t}-loss-E{e0}"],
                            data, metric)[0]
                for data, metric in (("sop", "mlm"), ("nsp", "nsp"), ("sop", "sop"))
            ]
            for t in tasks
        ]  # fmt: skip
        paper = [[p["MLM"], p["NSP"], p["SOP"]] for p in PAPER["table5"]
                 if p["sentence_task"] in tasks]  # fmt: skip
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, matrix, title in ((axes[0], ours, "ours"), (axes[1], paper, "paper (ALBERT-base)")):
            ax.imshow(matrix, vmin=0, vmax=100, cmap="viridis")
            ax.set_xticks(range(3), ["MLM", "NSP", "SOP"])
            ax.set_yticks(range(len(tasks)), [f"trained: {TASK_NAMES[t]}" for t in tasks])
            for i, row in enumerate(matrix):
                for j, value in enumerate(row):
                    ax.text(j, i, f"{value:.1f}", ha="center", va="center", color="white")
            ax.set_title(f"held-out accuracy (%), {title}")
        save(fig, "sentence_tasks.png")

    # Accuracy against parameters (albert-tf params) for every pretrained row.
    pretrained = [r for r in by_name.values() if r["row"]["sentence_task"] == "sop"]
    if pretrained:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for r in pretrained:
            mean, se = finetune_acc(r)
            ax.errorbar(r["params"] / 1e6, mean, yerr=0 if math.isnan(se) else se, marker="o",
                        capsize=3)  # fmt: skip
            ax.annotate(r["row"]["name"], (r["params"] / 1e6, mean), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")  # fmt: skip
        ax.set_xlabel("parameters (millions, backbone; albert-tf params)")
        ax.set_ylabel(f"{budget.task_title} test accuracy (%)")
        save(fig, "params.png")
    return written


def write_report(results: Path, budget, rows: list) -> None:
    """results.json, table.md and the plots from the finished rows; prints the table."""
    import dataclasses

    by_name = load_rows(results)
    claim_list = claims(budget, by_name)
    results.mkdir(parents=True, exist_ok=True)
    summary = {
        "budget": dataclasses.asdict(budget),
        "rows_planned": [r.name for r in rows],
        "rows_done": sorted(by_name),
        "claims": claim_list,
        "rows": by_name,
    }
    with atomic_file(results / "results.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
    table = markdown(budget, by_name, claim_list)
    with atomic_file(results / "table.md") as tmp:
        tmp.write_text(table)
    plots(results, budget, by_name)
    print(table)
    print(f"{len(by_name)} of {len(rows)} rows done; results in {results}")
