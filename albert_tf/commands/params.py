"""`albert-tf params`: parameter breakdown of a preset or config file, as JSON."""

from __future__ import annotations

import argparse
import json

from albert_tf.config import resolve_config
from albert_tf.params import parameter_breakdown

HELP = "Print a config's parameter count and breakdown as JSON."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, help="preset name (base, large, ...) or albert_config.json"
    )


def run(args: argparse.Namespace) -> int:
    print(json.dumps(parameter_breakdown(resolve_config(args.config)), indent=2))
    return 0
