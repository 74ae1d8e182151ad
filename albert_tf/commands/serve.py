"""`albert-tf serve`: fine-tuned models through one Triton, behind a KServe v2 HTTP front."""

from __future__ import annotations

import argparse
import re

from albert_tf.errors import ConfigError, InstallError
from albert_tf.runtimes import available_cores
from albert_tf.runtimes.triton.layout import ServingConfig, find_repository, model_folder
from albert_tf.runtimes.triton.serve_env import create_env, load_env

HELP = (
    "Serve fine-tuned models (classifiers, regression, SQuAD: each DIR/triton/ repository) "
    "from one Triton over KServe v2 HTTP; --create-env first makes the environment Triton "
    "runs in."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directories",
        nargs="*",
        metavar="DIR",
        help="a fine-tuned directory with triton/ (`albert-tf export --finetuned DIR --triton`) "
        "or the triton/ repository itself; several are served side by side",
    )
    where = parser.add_argument_group("where")
    where.add_argument("--host", default="127.0.0.1", help="address of the HTTP, gRPC, metrics")
    where.add_argument("--port", type=int, default=8000, help="KServe v2 HTTP port")
    where.add_argument(
        "--model-name",
        action="append",
        metavar="NAME",
        help="a model's name in URLs, once per DIR in order (default: with one DIR its model's "
        "folder, `classifier` for a classifier; with several each DIR's folder name)",
    )
    for name, port in (
        ("--grpc-port", "Triton's own gRPC port"),
        ("--metrics-port", "Triton's metrics port"),
        ("--triton-port", "Triton's HTTP port, on 127.0.0.1 only"),
    ):
        where.add_argument(name, type=int, help=f"{port} (default: a free one, printed)")
    limits = parser.add_argument_group("limits (a request over one gets 413, before the model)")
    limits.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request body size")
    limits.add_argument("--max-texts", type=int, default=64, help="texts per request")
    limits.add_argument("--max-text-bytes", type=int, default=20_000, help="UTF-8 bytes per text")
    limits.add_argument(
        "--max-pending", type=int, default=256, help="requests in flight; more get 503"
    )
    limits.add_argument(
        "--shutdown-grace",
        type=float,
        default=1.0,
        help="seconds after SIGTERM with /v2/health/ready at 503 and requests still answered",
    )
    limits.add_argument(
        "--drain-timeout", type=float, default=30.0, help="seconds in-flight requests may take"
    )
    model = parser.add_argument_group("the model's configuration (config.pbtxt)")
    model.add_argument(
        "--instances",
        type=int,
        default=2,
        help="model instances (processes); 2 by default, since with one Triton's batcher "
        "holds a request that comes while the instance is being released for 500 ms",
    )
    model.add_argument(
        "--threads",
        type=int,
        help="ONNX Runtime threads per instance (default: the cores this process may use, "
        "divided among the instances)",
    )
    model.add_argument(
        "--max-queue-delay-us",
        type=int,
        default=0,
        help="how long Triton's batcher waits for more requests (microseconds; 0: a batch is "
        "what queued while the model was busy)",
    )
    model.add_argument(
        "--max-queue-size", type=int, default=64, help="requests Triton queues; more get 503"
    )
    model.add_argument("--no-batching", action="store_true", help="serve each request alone")
    model.add_argument(
        "--poll-seconds",
        type=float,
        default=2.0,
        help="how often DIR/triton/ is checked for a new model, loaded without failing requests",
    )
    env = parser.add_argument_group("the serving environment")
    env.add_argument(
        "--env",
        metavar="PATH",
        help="the virtual environment Triton runs in (default: $ALBERT_TF_SERVE_ENV, else "
        "~/.cache/albert-tf/serve-env)",
    )
    env.add_argument(
        "--create-env",
        action="store_true",
        help="create the serving environment (nvidia-pytriton, onnxruntime, "
        "onnxruntime-extensions; needs PyPI) and exit; kept when already complete",
    )


def model_names(args: argparse.Namespace, repositories: list) -> list[str]:
    """The served models' names (`--model-name` once per DIR, else the defaults its help
    gives); ConfigError for a count that is not one per DIR, a name unfit for a URL, or two
    models with one name."""
    if args.model_name is not None:
        if len(args.model_name) != len(repositories):
            raise ConfigError(
                f"--model-name given {len(args.model_name)} times for {len(repositories)} DIRs: "
                "give it once per DIR, in order, or not at all"
            )
        names = list(args.model_name)
    elif len(repositories) == 1:
        names = [model_folder(repositories[0]).name]
    else:
        names = [(r.parent if r.name == "triton" else r).resolve().name for r in repositories]
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
            raise ConfigError(
                f"model name {name!r}: use letters, digits, '_', '.' and '-' (--model-name)"
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(
            f"two models are named {repeated[0]!r}: give each DIR its own --model-name"
        )
    return names


def options_of(args: argparse.Namespace) -> object:
    """The `ServeOptions` of the parsed flags; ConfigError for a value out of range, and
    InstallError without the serve extra."""
    try:
        from albert_tf.runtimes.triton.front import ServeOptions  # it needs aiohttp (serve extra)
    except ImportError as error:
        raise _missing_extra(error) from None

    for name in ("max_body_bytes", "max_texts", "max_text_bytes", "max_pending", "instances"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    ports = [args.port, args.grpc_port, args.metrics_port, args.triton_port]
    ports = [port for port in ports if port is not None]
    if len(set(ports)) < len(ports):
        raise ConfigError("--port, --grpc-port, --metrics-port and --triton-port must differ")
    threads = args.threads or max(1, available_cores() // args.instances)
    config = ServingConfig(
        max_batch_size=args.max_texts,
        max_queue_delay_us=args.max_queue_delay_us,
        max_queue_size=args.max_queue_size,
        instances=args.instances,
        intra_op_threads=threads,
        dynamic_batching=not args.no_batching,
    )
    return ServeOptions(
        host=args.host,
        port=args.port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        triton_port=args.triton_port,
        max_body_bytes=args.max_body_bytes,
        max_texts=args.max_texts,
        max_text_bytes=args.max_text_bytes,
        max_pending=args.max_pending,
        shutdown_grace=args.shutdown_grace,
        drain_timeout=args.drain_timeout,
        poll_seconds=args.poll_seconds,
        config=config,
    )


def run(args: argparse.Namespace) -> int:
    if args.create_env:
        create_env(args.env)
        return 0
    if not args.directories:
        raise ConfigError("serve needs DIR (or --create-env)")
    options = options_of(args)
    repositories = [find_repository(directory) for directory in args.directories]
    sources = dict(zip(model_names(args, repositories), repositories, strict=True))
    env = load_env(args.env)
    try:
        from albert_tf.runtimes.triton.server import serve
    except ImportError as error:
        raise _missing_extra(error) from None
    return serve(sources, options, env)


def _missing_extra(error: ImportError) -> InstallError:
    return InstallError(
        f'serve needs the serve extra ({error.name} is missing): pip install -e ".[serve]"'
    )
