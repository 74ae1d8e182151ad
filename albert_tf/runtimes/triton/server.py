"""`albert-tf serve`: a Triton server on one machine, behind a KServe v2 HTTP front.

Triton (`albert_tf.runtimes.triton.serve_env`) serves a private copy of one or more model
repositories on loopback, each model under its own name with its own batcher, queue and
instances; the front, on `--host`/`--port`, is what clients reach:

- `POST /v2/models/NAME/infer` with the model's inputs BYTES [n] or [n, 1] (`text`, and
  `text_pair` for a pair task; `question` and `context` for SQuAD) returns its outputs
  (`albert_tf.runtimes.triton.layout.served_outputs`: `label` and `probabilities`, `value`,
  or `answer`, `char_start`, `char_end` and `null_score_diff`), one value per text shaped as
  the request's texts; an empty batch gets empty outputs without reaching Triton;
- `GET /v2/health/live`, `/v2/health/ready` (200 once every model is loaded, 503 while
  stopping), `/v2/models/NAME` (with a classifier's labels) and `/v2/models/NAME/ready`.

The front refuses, before the model runs: a body over `max_body_bytes` (413), more than
`max_texts` texts or a text over `max_text_bytes` UTF-8 bytes (413), malformed JSON, a missing,
unknown or mistyped input, a text that is not UTF-8 or holds a lone surrogate (400), and a
request beyond `max_pending` in flight (503, as Triton's own bounded queue answers). Triton 2.51
answers malformed JSON with 500 and has no request-size limit, hence the front. gRPC and metrics
are Triton's own, on `--grpc-port` and `--metrics-port` of `--host`, without the front's limits.

Each server answers with its own Triton or not at all. Triton's ports that were not given
(`--grpc-port`, `--metrics-port`, `--triton-port`) are chosen free at start, so servers side by
side never meet; one taken before Triton bound it is chosen again. The private repository's
configuration carries a random token, and the front becomes ready only once Triton at its
upstream port returns that token: a stranger on the port (another server's Triton, any HTTP
server) is never forwarded to. The front is ready only while the tritonserver it started runs;
when that process exits, readiness falls at once and `serve` stops with one line.

On SIGTERM (or SIGINT) the front reports not-ready at once, keeps answering for
`shutdown_grace` seconds (while load balancers take it out), refuses new requests (503), lets
the requests in flight finish within `drain_timeout`, stops Triton and exits 0. A changed
source repository (`export --finetuned DIR --triton` again) is staged as the next version of its
model and loaded while the old one serves: Triton moves to the new version when it is ready and
no request fails. A version Triton cannot load is dropped; the old one serves on, and so do the
other models.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from albert_tf.errors import ExportError
from albert_tf.runtimes.triton.front import Front, ServedModel, ServeOptions
from albert_tf.runtimes.triton.layout import CONFIG_FILE, VERSION, config_pbtxt, model_folder
from albert_tf.runtimes.triton.serve_env import ServeEnv, server_environ

# A `config.pbtxt` parameter of the private repository: the server's token, which the front
# reads back through Triton's /v2/models/NAME/config before it trusts the port.
TOKEN_PARAMETER = "albert_tf_serve_token"

# === The private repository ===


def _source_state(source: Path) -> tuple:
    """What says the source repository changed: every file's name, size and mtime."""
    files = sorted(p for p in source.rglob("*") if p.is_file())
    return tuple(
        (str(p.relative_to(source)), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    )


class PrivateRepository:
    """One model of Triton's model repository `root`: a copy of the source repository's model
    under `name`, one version directory per model staged, the config written with the serve
    options' settings and `token` (as the parameter `TOKEN_PARAMETER`)."""

    def __init__(self, source: Path, root: Path, name: str, options: ServeOptions, token: str):
        self.source = source
        self.name = name
        self.model_dir = root / name
        self.options = options
        self.token = token
        self.version = 0
        self.meta: dict[str, Any] = {}

    def stage(self) -> int:
        """Copies the source's model as the next version; returns it. ExportError if the
        source is incomplete (it may be being replaced: the caller tries again)."""
        model = model_folder(self.source)
        files = list((model / VERSION).iterdir()) if model and (model / VERSION).is_dir() else []
        report_file = self.source / "report.json"
        if not files or not report_file.is_file():
            raise ExportError(f"{self.source} is not a complete model repository")
        meta = json.loads(report_file.read_text(encoding="utf-8"))
        version = self.model_dir / str(self.version + 1)
        shutil.rmtree(version, ignore_errors=True)
        version.mkdir(parents=True)
        for path in files:
            if path.is_dir():
                shutil.copytree(path, version / path.name)
            else:
                shutil.copyfile(path, version / path.name)
        config = config_pbtxt(
            self.name,
            meta["inputs"],
            len(meta.get("labels", [])),
            self.options.config,
            chr(int(meta["nul_substitute"], 16)) if meta.get("nul_substitute") else "",
            meta.get("task", "classify"),
        )
        token = (
            f'parameters {{ key: "{TOKEN_PARAMETER}" value: {{ string_value: "{self.token}" }} }}'
        )
        (self.model_dir / CONFIG_FILE).write_text(config + token + "\n", encoding="utf-8")
        self.version += 1
        self.meta = meta
        return self.version

    def prune(self) -> None:
        """Removes the version directories before the current one."""
        for path in self.model_dir.iterdir():
            if path.is_dir() and path.name.isdigit() and int(path.name) < self.version:
                shutil.rmtree(path, ignore_errors=True)

    def drop(self, version: int, meta: dict[str, Any]) -> None:
        """Forgets `version`, which Triton did not load: its directory goes, so that Triton's
        next look at the repository finds the version serving (`meta` its report) as the
        latest."""
        shutil.rmtree(self.model_dir / str(version), ignore_errors=True)
        self.meta = meta


# === Triton ===


def with_free_ports(options: ServeOptions) -> ServeOptions:
    """`options` with a port free now for each of Triton's ports not given: gRPC and metrics on
    `options.host`, HTTP on 127.0.0.1. The ports differ from each other (all are held until
    the last is chosen); another process may still take one before Triton binds it."""
    wanted = {
        "grpc_port": options.host,
        "metrics_port": options.host,
        "triton_port": "127.0.0.1",
    }
    wanted = {field: host for field, host in wanted.items() if getattr(options, field) is None}
    held = []
    try:
        for host in wanted.values():
            family, kind, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
            held.append(socket.socket(family, kind))
            held[-1].bind(address)
        ports = [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()
    return dataclasses.replace(options, **dict(zip(wanted, ports, strict=True)))


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent dies (Linux), so no Triton outlives `serve`."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_triton(
    env: ServeEnv, repository: Path, names: list[str], options: ServeOptions, log: Path
) -> Any:
    """Starts tritonserver on `repository` (explicit model control, the models `names` loaded
    at start) in a session of its own, its output in `log`; returns the Popen."""
    command = [
        str(env.tritonserver),
        f"--model-repository={repository}",
        f"--backend-directory={env.backends}",
        "--model-control-mode=explicit",
        *(f"--load-model={name}" for name in names),
        "--http-address=127.0.0.1",
        f"--http-port={options.triton_port}",
        f"--grpc-address={options.host}",
        f"--grpc-port={options.grpc_port}",
        f"--metrics-address={options.host}",
        f"--metrics-port={options.metrics_port}",
        f"--exit-timeout-secs={max(1, int(options.drain_timeout))}",
        "--strict-readiness=true",
        "--log-verbose=0",
    ]
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_environ(env),
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def stop_triton(process: Any, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _log_lines(log: Path) -> list[str]:
    """Triton's log without its tables and blank lines."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [line for line in text.splitlines() if line.strip() and not line.startswith(("+", "|"))]


def _tail(log: Path, lines: int = 5) -> str:
    return " / ".join(_log_lines(log)[-lines:])


class PortTaken(ExportError):
    """tritonserver exited because one of its ports was in use."""


# === Serving ===


async def _get(front: Front, path: str) -> tuple[int, Any]:
    """The status and JSON answer of GET `path` on the upstream ((0, None) when it does not
    answer; None for an answer that is not JSON)."""
    try:
        async with front.session.get(front.upstream + path) as response:
            try:
                return response.status, await response.json(content_type=None)
            except ValueError:
                return response.status, None
    except Exception:  # noqa: BLE001 (any failure to answer is "not yet")
        return 0, None


async def _serves_our_model(front: Front, name: str, token: str) -> bool:
    """Whether the upstream is our Triton, with model `name` ready: its configuration carries
    `token`, which only the private repository holds."""
    model = f"/v2/models/{name}"
    if (await _get(front, f"{model}/ready"))[0] != 200:
        return False
    status, config = await _get(front, f"{model}/config")
    parameters = config.get("parameters") if isinstance(config, dict) else None
    given = parameters.get(TOKEN_PARAMETER) if isinstance(parameters, dict) else None
    return status == 200 and isinstance(given, dict) and given.get("string_value") == token


async def _serves_our_models(front: Front, token: str) -> bool:
    """Whether the upstream is our Triton with every model of the front ready."""
    for name in front.models:
        if not await _serves_our_model(front, name, token):
            return False
    return True


async def _wait_loaded(front: Front, process: Any, token: str, log: Path, timeout: float) -> None:
    """Returns once `process`, the Triton at the front's upstream, has every model ready;
    PortTaken or ExportError when Triton exits, ExportError when `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not await _serves_our_models(front, token):
        if process.poll() is not None:
            taken = any("already in use" in line for line in _log_lines(log))
            error = PortTaken if taken else ExportError
            raise error(f"tritonserver exited ({process.returncode}): {_tail(log)}")
        if time.monotonic() > deadline:
            raise ExportError(
                f"tritonserver did not load the models in {timeout:.0f}s: {_tail(log)}"
            )
        await asyncio.sleep(0.2)


async def _start_engine(
    env: ServeEnv, root: Path, token: str, front: Front, tmp: Path, tries: int = 3
) -> tuple[Any, ServeOptions, Path]:
    """Starts tritonserver on the private repository `root` and points `front` at it; returns
    (the process, the options with its ports, its log) once every model is ready. A port chosen
    here and taken before Triton bound it is chosen again, up to `tries` starts; a port given
    is not."""
    given = front.options
    for attempt in range(1, tries + 1):
        options = with_free_ports(given)
        log = tmp / f"tritonserver-{attempt}.log"
        process = start_triton(env, root, list(front.models), options, log)
        front.upstream = f"http://127.0.0.1:{options.triton_port}"
        try:
            await _wait_loaded(front, process, token, log, timeout=300)
            return process, options, log
        except PortTaken:
            chosen = options != given
            if not chosen or attempt == tries:
                raise
        except BaseException:
            stop_triton(process, timeout=10)
            raise


async def _load(front: Front, repository: PrivateRepository, log) -> bool:
    """Stages the source's model as the next version of its model and has Triton load it (the
    old version serves until the new one is ready); whether it now serves. A version Triton
    does not load is dropped (`PrivateRepository.drop`): the old one serves on."""
    model: ServedModel = front.models[repository.name]
    serving = model.meta.get("version", repository.version)
    try:
        version = repository.stage()
    except (ExportError, OSError, ValueError, KeyError) as error:
        log(f"{repository.name}: not loaded, kept version {serving}: {error}")
        return False
    url = f"{front.upstream}/v2/repository/models/{repository.name}/load"
    async with front.session.post(url, json={}) as response:
        ok = response.status == 200
        detail = "" if ok else (await response.text())[:300]
    if ok:
        model.meta = {**repository.meta, "version": version}
        repository.prune()
        log(f"{repository.name}: now serving version {version} of {repository.source}")
    else:
        repository.drop(version, {k: v for k, v in model.meta.items() if k != "version"})
        log(f"{repository.name}: Triton did not load version {version}, kept {serving}: {detail}")
    return ok


async def _watch(front: Front, repository: PrivateRepository, log) -> None:
    """Loads the source repository again each time it changed and then held still for one
    poll (`export` replaces it whole, but may be caught between its two renames)."""
    loaded = seen = _source_state(repository.source)
    while True:
        await asyncio.sleep(front.options.poll_seconds)
        with contextlib.suppress(OSError):
            state = _source_state(repository.source)
            if state != loaded and state == seen and state:
                await _load(front, repository, log)
                loaded = state
            seen = state


async def _drain(front: Front) -> bool:
    """SIGTERM's sequence up to Triton's stop: not ready, the grace, refusal, the requests in
    flight finished; whether they all finished within the drain timeout."""
    front.draining = True
    await asyncio.sleep(front.options.shutdown_grace)
    front.closed = True
    deadline = time.monotonic() + front.options.drain_timeout
    while front.pending and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return front.pending == 0


async def _serve(env: ServeEnv, sources: dict[str, Path], options: ServeOptions, log) -> int:
    with tempfile.TemporaryDirectory(prefix="albert-tf-serve-") as tmp:
        token = secrets.token_hex(16)
        root = Path(tmp) / "repository"
        repositories = [
            PrivateRepository(source, root, name, options, token)
            for name, source in sources.items()
        ]
        for repository in repositories:
            repository.stage()
        front = Front(options, list(sources))
        # The requests in flight are drained before the runner stops: what is left then is a
        # connection with no request in it, which need not hold the exit up.
        runner = web.AppRunner(front.app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        process = None
        try:
            # The front's port first, so that no port chosen for Triton can be it.
            await web.TCPSite(runner, options.host, options.port, backlog=1024).start()
            process, ports, triton_log = await _start_engine(env, root, token, front, Path(tmp))
            front.engine = process
            for repository in repositories:
                front.models[repository.name].meta = {
                    **repository.meta,
                    "version": repository.version,
                }
            front.ready = True
            engine = (
                f" (KServe v2; Triton gRPC {options.host}:{ports.grpc_port}, metrics "
                f"{options.host}:{ports.metrics_port}, HTTP 127.0.0.1:{ports.triton_port})"
            )
            for i, (name, source) in enumerate(sources.items(), start=1):
                log(
                    f"serving {name} from {source} at "
                    f"http://{options.host}:{options.port}/v2/models/{name}/infer"
                    + (engine if i == len(sources) else "")
                )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            watchers = [asyncio.create_task(_watch(front, r, log)) for r in repositories]
            died = asyncio.create_task(asyncio.to_thread(process.wait))
            await asyncio.wait(
                [asyncio.create_task(stop.wait()), died], return_when="FIRST_COMPLETED"
            )
            for watcher in watchers:
                watcher.cancel()
            if died.done():
                raise ExportError(
                    f"tritonserver exited ({process.returncode}): {_tail(triton_log)}"
                )
            log("stopping: not ready; finishing the requests in flight")
            drained = await _drain(front)
        finally:
            await runner.cleanup()
            if process is not None:
                stop_triton(process, timeout=10)
    log("stopped" if drained else f"stopped with {front.pending} requests unfinished")
    return 0 if drained else 1


def serve(sources: dict[str, Path], options: ServeOptions, env: ServeEnv, log=None) -> int:
    """Serves the model repositories `sources` (name -> `layout.find_repository`'s answer), each
    under its name, from one Triton until SIGTERM or SIGINT; the exit code (0: every request in
    flight was answered)."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    return asyncio.run(_serve(env, sources, options, log))
