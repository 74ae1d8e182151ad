"""The time figures the docs quote, from their one measured source: docs/results/ci_runs.json
(`bash .ci/run` on a clean clone, nothing else running, as the closing notes recorded each run).

    python docs/scripts/timings.py   # prints the phrases

tests/docs/test_docs_timings.py checks every quickstart and test-suite time in README.md, docs/ and
the quickstart's help against `phrases()`: a new CI run goes into the JSON, then the phrases
into the text.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent  # docs/scripts/ -> the repository
SOURCE = REPO / "docs" / "results" / "ci_runs.json"


def _span(values: list[float], digits: int) -> str:
    """ "1.5-1.8" (or "1.8" when every run gave the same figure) at `digits` decimals."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


def phrases(source: Path = SOURCE) -> dict[str, str]:
    """{"quickstart": minutes of `albert-tf quickstart` in all, "suite": minutes of the test
    suite}, each the span over the recorded runs ("1.5-1.8", "17-18")."""
    runs = json.loads(source.read_text())["runs"]
    return {
        "quickstart": _span([r["quickstart_minutes"] for r in runs], 1),
        "suite": _span([r["suite_minutes"] for r in runs], 0),
    }


if __name__ == "__main__":
    print(json.dumps(phrases()))
