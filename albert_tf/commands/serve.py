"""`albert-tf serve`: a fine-tuned classifier through Triton, behind a KServe v2 HTTP front."""

from __future__ import annotations

import argparse

from albert_tf.errors import ConfigError, InstallError
from albert_tf.runtimes import available_cores
from albert_tf.runtimes.triton.layout import ServingConfig, find_repository
from albert_tf.runtimes.triton.serve_env import create_env, load_env

HELP = (
    "Serve a fine-tuned classifier (its DIR/triton/ repository) through Triton over KServe v2 "
    "HTTP; --create-env first makes the environment Triton runs in."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="a fine-tuned directory with triton/ (`albert-tf export --finetuned DIR --triton`) "
        "or the triton/ repository itself",
    )
    where = parser.add_argument_group("where")
    where.add_argument("--host", default="127.0.0.1", help="address of the HTTP, gRPC, metrics")
    where.add_argument("--port", type=int, default=8000, help="KServe v2 HTTP port")
    where.add_argument("--model-name", default="classifier", help="the model's name in URLs")
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


def options_of(args: argparse.Namespace) -> object:
    """The `ServeOptions` of the parsed flags; ConfigError for a value out of range."""
    from albert_tf.runtimes.triton.front import ServeOptions  # it needs aiohttp (serve extra)

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
        model_name=args.model_name,
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
    if not args.directory:
        raise ConfigError("serve needs DIR (or --create-env)")
    options = options_of(args)
    source = find_repository(args.directory)
    env = load_env(args.env)
    try:
        from albert_tf.runtimes.triton.server import serve
    except ImportError as error:
        raise InstallError(
            f'serve needs the serve extra ({error.name} is missing): pip install -e ".[serve]"'
        ) from None
    return serve(source, options, env)
