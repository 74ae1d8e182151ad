"""Builds train.tsv, dev.tsv and test.tsv here from VADER's Amazon review snippets.

The source is `amazonReviewSnippets_GroundTruth.txt` of the VADER ground truth, inside the
vaderSentiment 3.3.2 sdist (MIT licence; `additional_resources/hutto_ICWSM_2014.tar.gz`): 3,708
sentences from Amazon product reviews, each with the mean of at least 20 people's ratings from
-4 to +4. A mean above 0 is `positive`, below 0 `negative`; the 98 rated exactly 0 are
dropped. The rows are shuffled with seed 0 and split 80/10/10, the split
experiments/finetune_defaults.py chose albert_en_mini's fine-tuning defaults on (train and dev
only; test was never read). README.md here says more; LICENSE-vaderSentiment.txt is the
sdist's licence.

The committed TSVs are what users read; this script only rebuilds them. It reads the sdist and
downloads nothing:

    pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d /tmp/vader
    python examples/sentiment/build.py --sdist /tmp/vader/vaderSentiment-3.3.2.tar.gz
"""

from __future__ import annotations

import argparse
import random
import sys
import tarfile
from pathlib import Path

from albert_tf.io_utils import atomic_file

HERE = Path(__file__).resolve().parent
INNER = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
SNIPPETS = "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt"
SPLITS = {"train": (0.0, 0.8), "dev": (0.8, 0.9), "test": (0.9, 1.0)}
HEADER = "sentence\tlabel\n"


def read_snippets(sdist: Path) -> str:
    """The ground-truth file's text (latin-1) from the sdist."""
    with tarfile.open(sdist) as outer, tarfile.open(fileobj=outer.extractfile(INNER)) as inner:
        return inner.extractfile(SNIPPETS).read().decode("latin-1")


def labeled_rows(text: str) -> list[tuple[str, str]]:
    """`(sentence, label)` of each line `id<TAB>rating<TAB>sentence` with a non-zero rating,
    whitespace collapsed (a tab in a sentence would end its TSV field)."""
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 3 or float(fields[1]) == 0:
            continue
        sentence = " ".join("\t".join(fields[2:]).split())
        rows.append((sentence, "positive" if float(fields[1]) > 0 else "negative"))
    return rows


def split(rows: list[tuple[str, str]], seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """The seeded 80/10/10 split, by name."""
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    n = len(rows)
    return {name: rows[int(a * n) : int(b * n)] for name, (a, b) in SPLITS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", required=True, help="vaderSentiment-3.3.2.tar.gz")
    parser.add_argument("--output", default=str(HERE), help="directory of the TSVs (default: here)")
    args = parser.parse_args(argv)
    if not Path(args.sdist).is_file():
        print(f"build.py: --sdist {args.sdist} does not exist", file=sys.stderr)
        return 2
    try:
        text = read_snippets(Path(args.sdist))
    except (tarfile.TarError, KeyError) as error:
        print(
            f"build.py: {args.sdist} is not the vaderSentiment 3.3.2 sdist ({error})",
            file=sys.stderr,
        )
        return 2
    for name, rows in split(labeled_rows(text)).items():
        with atomic_file(Path(args.output) / f"{name}.tsv") as tmp:
            tmp.write_text(HEADER + "".join(f"{s}\t{label}\n" for s, label in rows), "utf-8")
        print(f"wrote {len(rows)} rows to {Path(args.output) / name}.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
