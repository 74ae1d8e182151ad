"""Every figure in README.md, docs/ and the model card is generated from a committed record or
marked with the record and key it comes from (docs/scripts/figures.py holds the rules;
docs/development.md says them)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("figures", REPO / "docs/scripts/figures.py")
figures = importlib.util.module_from_spec(_spec)
sys.modules["figures"] = figures  # its dataclasses look their module up by name
_spec.loader.exec_module(figures)

# Pages not yet converted, each with its count of figures that have no record: the count must be
# exact, so a new unmarked figure fails here and a page's entry shrinks as its figures are marked.
# Issue 61 is done when this is empty.
PENDING = {
    "README.md": 27,
    "benchmarks/README.md": 1107,
    "docs/changelog.md": 33,
    "docs/guides/fine-tuning.md": 73,
    "docs/guides/pretraining.md": 35,
    "docs/guides/quickstart.md": 84,
    "docs/guides/serving-under-load.md": 186,
    "docs/results/how-it-was-measured.md": 118,
    "docs/results/speed.md": 63,
    "docs/scripts/model_card.py": 3,
    "experiments/README.md": 660,
}


def _problems(path) -> list[str]:
    return figures.problems(path.read_text(), str(path.relative_to(REPO)))


@pytest.mark.parametrize("path", figures.pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_figure_has_a_record(path):
    found = _problems(path)
    relative = str(path.relative_to(REPO))
    if relative in PENDING:
        assert len(found) == PENDING[relative], (
            f"{relative} is pending with {PENDING[relative]} figures without a record, and has "
            f"{len(found)} (mark them, or set its count): " + "\n".join(found)
        )
    else:
        assert not found, "figures without a record:\n" + "\n".join(found)


def test_pending_names_only_pages_that_are_read():
    read = {str(p.relative_to(REPO)) for p in figures.pages()} | set(figures.GENERATORS)
    assert set(PENDING) <= read


@pytest.mark.parametrize("script", sorted(figures.GENERATORS))
def test_a_generator_writes_no_figure_of_its_own(script):
    found = figures.generator_figures(script)
    assert len(found) == PENDING.get(script, 0), "\n".join(found)


def _found(text: str) -> list[str]:
    return [f.text for f in figures.figures_in(text)]


def test_the_rules_find_measured_numbers():
    assert _found("scores 0.778 on test (C = 10)") == ["0.778"]
    assert _found("17-18 minutes, 1.5-1.8 minutes in all") == ["18 minutes", "1.5", "1.8 minutes"]
    assert _found("1.27x faster, 58.5% against 6 MB") == ["1.27x", "58.5%", "6 MB"]
    assert _found("1.06x-1.12x, 4.2-5%") == ["1.06x", "1.12x", "4.2", "5%"]
    assert _found("+0.5 ± 0.8 points, 6.2 +- 1.0") == ["+0.5", "± 0.8 points", "6.2", "+- 1.0"]
    assert _found("| bfloat16 | 2,105 | 490 |") == ["2,105", "490"]


def test_the_rules_leave_out_settings_versions_and_code():
    text = figures._blank(
        "Python 3.10-3.12, TensorFlow 2.20, oneDNN 3.7.3, SQuAD v1.1, within 1e-5, 1,000 steps "
        "of batch 32 x 128, on 2026-11-29, top-5, int8, `--dropout 0.1`, <!-- 0.5 -->, "
        "[page](a/0.5.md)"
    )
    assert _found(text) == []
    assert _found("| labels | accuracy |\n|---|---|") == []


def _page(marker: str) -> str:
    return f"<!-- figures: {marker} -->\nAt 1,000 labels: 0.643 +- 0.012 points.\n"


RECORD = "experiments/results/label_efficiency/results.json#rows"


def _row(arm: str, labels: int) -> tuple[int, dict]:
    rows = json.loads((REPO / RECORD.partition("#")[0]).read_text())["rows"]
    return next((n, r) for n, r in enumerate(rows) if r["arm"] == arm and r["labels"] == labels)


def test_a_marker_holds_only_when_its_record_says_so():
    n, row = _row("distilled_pt", 300)
    shown = f"<!-- figures: {RECORD}.{n}.test_mean, {RECORD}.{n}.test_se -->\n"
    page = shown + f"At 300 labels: {row['test_mean']:.3f} +- {row['test_se']:.3f}.\n"
    assert figures.problems(page, "page.md") == []
    wrong = page.replace(f"{row['test_mean']:.3f}", f"{row['test_mean'] + 0.01:.3f}")
    assert "not one of its marker's values" in figures.problems(wrong, "page.md")[0]
    unshown = shown + f"At 300 labels: {row['test_mean']:.3f}.\n"
    assert "is not shown in the block" in figures.problems(unshown, "page.md")[0]
    missing = figures.problems(_page(f"{RECORD}.{n}.nothing"), "page.md")
    assert "no 'nothing' there" in missing[0]
    assert figures.problems("At 300 labels: 0.643.\n", "page.md") == ["page.md:1: 0.643: no record"]


def test_a_ratio_and_a_percentage_read_their_record():
    n, row = _row("distilled_pt", 300)
    m, bow = _row("bow", 300)
    ratio = row["test_mean"] / bow["test_mean"]
    page = (
        f"<!-- figures: {RECORD}.{n}.test_mean / {RECORD}.{m}.test_mean, {RECORD}.{n}.test_mean"
        f" -->\n{ratio:.2f}x the bag of words, {100 * row['test_mean']:.1f}%.\n"
    )
    assert figures.problems(page, "page.md") == []


def test_the_example_on_the_development_page_holds():
    page = (REPO / "docs" / "development.md").read_text()
    example = page.split("```markdown\n", 1)[1].split("```", 1)[0]
    assert example.startswith("<!-- figures: ")
    assert figures.problems(example, "example.md") == []
    assert figures.problems(example.replace("58.5%", "59.5%"), "example.md")


def test_a_difference_and_its_standard_error_read_their_records():
    n, row = _row("distilled_pt", 300)
    m, bow = _row("bow", 300)
    gap, se = (
        row["test_mean"] - bow["test_mean"],
        (row["test_se"] ** 2 + bow["test_se"] ** 2) ** 0.5,
    )
    marker = (
        f"<!-- figures: {RECORD}.{n}.test_mean - #rows.{m}.test_mean,"
        f" hypot(#rows.{n}.test_se, #rows.{m}.test_se) -->\n"
    )
    page = marker + f"{100 * gap:+.1f} +- {100 * se:.1f} points over the bag of words.\n"
    assert figures.problems(page, "page.md") == []
    flipped = page.replace(f"{100 * gap:+.1f}", f"{-100 * gap:+.1f}")
    assert "not one of its marker's values" in figures.problems(flipped, "page.md")[0]
    behind = page.replace(f"{100 * gap:+.1f}", f"{100 * gap:.1f}").replace("over", "behind")
    reverse = behind.replace(
        f"{RECORD}.{n}.test_mean - #rows.{m}", f"{RECORD}.{m}.test_mean - #rows.{n}"
    )
    assert figures.problems(reverse, "page.md") == []  # unsigned, "behind" says the sign
    with pytest.raises(KeyError, match="not arithmetic"):
        figures.record_value(f"__import__('os') + {RECORD}.{n}.test_mean")


def test_a_setting_reads_its_constant_or_default_and_a_marker_names_a_record():
    assert figures.record_value("preprocess/pretraining_data/pipeline.py#BATCH_BYTES") == 2**20
    coverage = "preprocess/spm_train.py#train_sentencepiece.character_coverage"
    assert figures.record_value(coverage) == 0.99995
    with pytest.raises(KeyError, match="names no record"):
        figures.record_value("4 * 6000000")
