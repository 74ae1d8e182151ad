"""The quickstart's and the test suite's times, wherever the docs give them, come from one
measured source: docs/results/ci_runs.json (docs/scripts/timings.py makes the phrases)."""

from __future__ import annotations

import importlib.util
import re

from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("timings", REPO / "docs/scripts/timings.py")
timings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timings)

SPAN = r"(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)"
# Where the quickstart's time is given: each file says it at least once, and only so.
QUICKSTART = {
    "README.md": rf"{SPAN} minutes in all",
    "docs/guides/quickstart.md": rf"{SPAN} minutes in all",
    "docs/results/how-it-was-measured.md": rf"{SPAN} minutes in all",
    "docs/index.md": rf"the whole pipeline run in {SPAN} minutes",
    "albert_tf/commands/quickstart.py": rf"{SPAN} min on 2 idle cores",
    "albert_tf/quickstart/pipeline.py": rf"{SPAN} min on 2 idle cores",
}
SUITE = {"README.md": rf"a test file at a time each \({SPAN} minutes on"}


def _figures(path: str, pattern: str) -> list[str]:
    return re.findall(pattern, " ".join((REPO / path).read_text().split()))


def test_the_phrases_are_the_span_of_the_recorded_runs(tmp_path):
    source = tmp_path / "runs.json"
    source.write_text(
        '{"runs": [{"quickstart_minutes": 1.83, "suite_minutes": 17.3},'
        ' {"quickstart_minutes": 1.5, "suite_minutes": 18.4}]}'
    )
    assert timings.phrases(source) == {"quickstart": "1.5-1.8", "suite": "17-18"}
    source.write_text('{"runs": [{"quickstart_minutes": 1.8, "suite_minutes": 17.3}]}')
    assert timings.phrases(source) == {"quickstart": "1.8", "suite": "17"}


def test_every_quickstart_and_suite_time_comes_from_the_ci_runs():
    phrases = timings.phrases()
    assert phrases == {"quickstart": "1.5-1.8", "suite": "17-18"}  # the runs recorded today
    for table, phrase in ((QUICKSTART, phrases["quickstart"]), (SUITE, phrases["suite"])):
        for path, pattern in table.items():
            figures = _figures(path, pattern)
            assert figures and set(figures) == {phrase}, (path, figures, phrase)
    stale = re.compile(r"about 3 min|3-6 min|2\.9 minutes in all")
    for path in QUICKSTART:
        assert not stale.search((REPO / path).read_text()), path
