"""Folders that left the tree, taken from git history and checked by digest.

Intermediate checkpoints (a run's resume state, a finished stage's model) were once committed
under experiments/resume/, and every clone paid for each of them. They have left the tree (no
file over 1 MB is tracked outside the shipped model, tests/fixtures and docs/assets:
tests/install/test_repository_size.py), and a record committed beside the results they back, such as
experiments/results/albert_en_mini_distill/checkpoints.json, keeps what is needed to get them
back. Its `folders` map each folder's path (relative to the repository root) to:

  commit     the commit that holds the folder (the last one before it left the tree)
  files      each file's path inside the folder -> {"sha256", "bytes"}
  rebuild    the commands that made it (hours; a rebuild need not give the same bytes)
  restore    the command that writes it from history into CACHE, digests checked
  from_git   the same with git alone, back into the tree

`restore` gives a script its folder: the folder itself while it is in the tree (as
`--save-resume` leaves it), else its files as committed, written into CACHE (ignored by git)
and checked against the record. The same from the shell, and a new record's entries:

  python -m experiments.history restore RECORD [FOLDER ...]     # each folder of RECORD by default
  python -m experiments.history record RECORD COMMIT FOLDER ...  # add folders to RECORD
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

from albert_tf.io_utils import atomic_dir

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / ".cache"


class HistoryError(RuntimeError):
    """git could not give what was asked (no repository here, an unknown commit or path)."""


def git(*args: str) -> bytes:
    """What `git -C ROOT ARGS` writes to stdout; HistoryError with git's message if it fails."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True)
    except FileNotFoundError:
        raise HistoryError("git is not installed") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise HistoryError(f"git {' '.join(args)}: {message}")
    return done.stdout


def blob(commit: str, path: str) -> bytes:
    """The file at `path` (relative to the repository root) as `commit` holds it."""
    return git("show", f"{commit}:{path}")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(commit: str, folder: str, record: Path) -> dict:
    """`record`'s entry for `folder` as `commit` holds it: the full commit id, the commands that
    take it from history, and each file's SHA-256 and size (`rebuild`, which script made it, is
    for a person to write)."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    names = git("ls-tree", "-r", "--name-only", "-z", full, "--", folder).decode().split("\0")
    files = {}
    for name in sorted(filter(None, names)):
        data = blob(full, name)
        inside = str(PurePosixPath(name).relative_to(folder))
        files[inside] = {"sha256": sha256(data), "bytes": len(data)}
    if not files:
        raise HistoryError(f"{full} holds no files under {folder}")
    return {
        "commit": full,
        "restore": f"python -m experiments.history restore {_key(record)} {folder}",
        "from_git": f"git restore --source {full} -- {folder}",
        "files": files,
    }


def _matches(folder: Path, files: dict[str, dict]) -> bool:
    """Whether `folder` holds exactly `files`, every digest equal."""
    present = {str(p.relative_to(folder).as_posix()) for p in folder.rglob("*") if p.is_file()}
    return present == set(files) and all(
        sha256((folder / name).read_bytes()) == file["sha256"] for name, file in files.items()
    )


def _key(folder: Path) -> str | None:
    """`folder`'s path relative to the repository root (None outside it), as records key it."""
    try:
        return (Path.cwd() / folder).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def restore(folder: Path, record: Path) -> Path:
    """`folder` itself while it exists; else, when `record` lists it, CACHE/<its name> holding
    its files as the recorded commit holds them (written when missing or different, every digest
    checked); else `folder` unchanged, for the caller to report missing as before.

    Exits with a message when git history cannot give the files (a copy of the tree without
    .git: restore in a clone and carry CACHE)."""
    if folder.exists():
        return folder
    key = _key(folder)
    folders = json.loads(record.read_text())["folders"]
    if key not in folders:
        return folder
    item = folders[key]
    target = CACHE / folder.name
    if target.is_dir() and _matches(target, item["files"]):
        return target
    try:
        with atomic_dir(target, overwrite=True) as tmp:
            for name, file in item["files"].items():
                data = blob(item["commit"], f"{key}/{name}")
                if sha256(data) != file["sha256"]:
                    raise HistoryError(f"{key}/{name} at {item['commit']} is not the recorded file")
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_bytes(data)
    except HistoryError as e:
        sys.exit(
            f"error: {key} is not in the tree and git history could not give it ({e}). In a "
            f"clone: python -m experiments.history restore {_key(record)} {key}, then carry "
            f"{target.relative_to(ROOT)}"
        )
    print(f"restored {key} from git history ({item['commit'][:12]}) into {target}", flush=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("restore", help="write a record's folders into CACHE")
    take.add_argument("record", type=Path, help="a checkpoints.json record")
    take.add_argument("folders", nargs="*", help="folders of the record (default: all)")
    write = commands.add_parser("record", help="add folders as a commit holds them to a record")
    write.add_argument("record", type=Path, help="the record (created when missing)")
    write.add_argument("commit", help="the commit that holds the folders")
    write.add_argument("folders", nargs="+", help="paths relative to the repository root")
    args = parser.parse_args(argv)
    if args.command == "restore" and not args.record.is_file():
        sys.exit(f"error: no record {args.record}")
    record = json.loads(args.record.read_text()) if args.record.is_file() else {"folders": {}}
    if args.command == "record":
        for folder in args.folders:
            try:
                found = entry(args.commit, folder, args.record)
            except HistoryError as e:
                sys.exit(f"error: {e}")
            record["folders"][folder] = {**record["folders"].get(folder, {}), **found}
        args.record.write_text(json.dumps(record, indent=1) + "\n")
        return 0
    for folder in args.folders or list(record["folders"]):
        if folder not in record["folders"]:
            sys.exit(f"error: {args.record} has no folder {folder}")
        if (ROOT / folder).exists():
            sys.exit(f"error: {folder} is in the tree: nothing to restore")
        print(restore(ROOT / folder, args.record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
