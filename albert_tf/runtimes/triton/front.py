"""The KServe v2 HTTP front of `albert-tf serve` (see `albert_tf.runtimes.triton.server`).

`parse_request` checks a request body against the limits, `Front` answers the routes of each
served model (`ServedModel`) with aiohttp and forwards each accepted request to Triton on
loopback in Triton's [n, 1] shapes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

from albert_tf.runtimes.triton.layout import MODEL_NAME, ServingConfig, served_outputs
from albert_tf.runtimes.triton.model import TextError, check_text


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """How `albert-tf serve` serves (its flags).

    Attributes:
        host, port: where the KServe v2 HTTP front listens.
        grpc_port, metrics_port: Triton's own gRPC and metrics ports, on `host`; None: a port
            free at start (`albert_tf.runtimes.triton.server.with_free_ports`).
        triton_port: Triton's HTTP port, on 127.0.0.1 (the front's upstream); None: a port
            free at start.
        max_body_bytes, max_texts, max_text_bytes, max_pending: the front's limits, each
            model's own (`max_pending` requests in flight per model).
        shutdown_grace: seconds between SIGTERM and refusing new requests (not-ready meanwhile).
        drain_timeout: seconds the requests in flight may take to finish after that.
        request_timeout: seconds one request may wait for Triton (504 after).
        poll_seconds: how often the source repository is checked for a new model.
        config: each served model's batching, queue, instances and threads.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int | None = None
    metrics_port: int | None = None
    triton_port: int | None = None
    max_body_bytes: int = 1 << 20
    max_texts: int = 64
    max_text_bytes: int = 20_000
    max_pending: int = 256
    shutdown_grace: float = 1.0
    drain_timeout: float = 30.0
    request_timeout: float = 60.0
    poll_seconds: float = 2.0
    config: ServingConfig = ServingConfig()


class RequestError(Exception):
    """A request the front answers with `status` and `message`, without the model."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _text_input(tensor: Any, names: list[str], options: ServeOptions) -> tuple[str, list, list]:
    """One input of a request: (name, shape, texts); RequestError for what it may not be."""
    if not isinstance(tensor, dict) or tensor.get("name") not in names:
        name = tensor.get("name") if isinstance(tensor, dict) else tensor
        raise RequestError(400, f"unexpected input {name!r}: the model takes {', '.join(names)}")
    name, shape, data = tensor["name"], tensor.get("shape"), tensor.get("data")
    if tensor.get("datatype") != "BYTES":
        raise RequestError(400, f"input {name!r} must have datatype BYTES")
    if "parameters" in tensor and tensor["parameters"].get("binary_data_size") is not None:
        raise RequestError(400, "binary tensor data is not taken: send the texts as JSON")
    if not isinstance(data, list) or not isinstance(shape, list):
        raise RequestError(400, f"input {name!r} needs a shape and a data list")
    if shape not in ([len(data)], [len(data), 1]):
        raise RequestError(400, f"input {name!r}: shape {shape} does not hold {len(data)} texts")
    if len(data) > options.max_texts:
        raise RequestError(413, f"{len(data)} texts: at most {options.max_texts} per request")
    texts = []
    for i, value in enumerate(data):
        if not isinstance(value, str):
            raise RequestError(400, f"input {name!r}: text {i} is not a string")
        try:
            text = check_text(value, i, "\x00")  # a NUL is the model's to read or refuse
        except TextError as error:
            raise RequestError(400, f"input {name!r}: {error}") from None
        if len(text.encode("utf-8")) > options.max_text_bytes:
            raise RequestError(413, f"text {i}: over {options.max_text_bytes} UTF-8 bytes")
        texts.append(text)
    return name, shape, texts


def parse_request(body: bytes, names: list[str], options: ServeOptions) -> tuple[dict, list, Any]:
    """A KServe v2 request body -> ({input: texts}, the shape of the first input, its id);
    RequestError (400 or 413) for anything the model must not see."""
    try:
        request = json.loads(body)
    except UnicodeDecodeError:
        raise RequestError(400, "the request body is not valid UTF-8") from None
    except ValueError as error:
        raise RequestError(400, f"the request body is not JSON: {error}") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise RequestError(400, 'the request needs an "inputs" list')
    texts, shape = {}, None
    for tensor in request["inputs"]:
        name, tensor_shape, values = _text_input(tensor, names, options)
        texts[name] = values
        shape = shape or tensor_shape
    missing = [n for n in names if n not in texts]
    if missing:
        raise RequestError(400, f"input {missing[0]!r} is missing")
    if len({len(v) for v in texts.values()}) > 1:
        raise RequestError(400, f"inputs {', '.join(names)} differ in length")
    return texts, shape, request.get("id")


def _error(status: int, message: str, **headers: str) -> web.Response:
    """An error in KServe v2's shape: `{"error": message}`."""
    return web.json_response({"error": message}, status=status, headers=headers or None)


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """aiohttp's own errors (an unknown path or model 404, a wrong method 405 with its
    `Allow`) and a fault of the front's (500, logged as aiohttp logs one) in KServe v2's shape,
    as the front's other errors are."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        kept = {name: error.headers[name] for name in ("Allow",) if name in error.headers}
        return _error(error.status, f"{error.reason}: {request.method} {request.path}", **kept)
    except Exception as error:  # noqa: BLE001 (any fault is answered, and logged)
        request.app.logger.exception("Error handling request %s %s", request.method, request.path)
        return _error(500, f"internal error: {type(error).__name__}")


@dataclasses.dataclass
class ServedModel:
    """One model the front serves: its `name` in the URLs (and Triton's), `meta` (the report of
    the version serving, with its "version"; set by the server) and its requests in flight."""

    name: str
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    pending: int = 0

    def outputs(self) -> list[tuple[str, str, int]]:
        """Its outputs (`layout.served_outputs` of its report's task; a report without one is
        a classifier's)."""
        return served_outputs(self.meta.get("task", "classify"), len(self.meta.get("labels", [])))


class Front:
    """The routes of the models `names` (by default one, `classifier`), over Triton at
    `upstream`; `upstream`, `engine`,
    `ready`, `draining`, `closed` and each model's `meta` are set by the server.

    `engine` is the tritonserver process the server started (a `subprocess.Popen`): the front
    is ready, and forwards, only while that process runs, so a port that outlived its Triton
    is never reached. A name that is not served gets 404.
    """

    def __init__(self, options: ServeOptions, names: list[str] | None = None, upstream: str = ""):
        self.options = options
        self.models = {name: ServedModel(name) for name in names or [MODEL_NAME]}
        self.upstream = upstream
        self.engine: Any = None
        self.ready = False
        self.draining = False  # not ready: SIGTERM came
        self.closed = False  # refusing requests: the grace after SIGTERM is over
        self.session: ClientSession | None = None

    @property
    def pending(self) -> int:
        """The requests in flight, of every model."""
        return sum(model.pending for model in self.models.values())

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=self.options.max_body_bytes, middlewares=[_json_errors]
        )
        app.add_routes(
            [
                web.get("/v2/health/live", self.live),
                web.get("/v2/health/ready", self.health_ready),
                web.get("/v2/models/{name}", self.metadata),
                web.get("/v2/models/{name}/ready", self.model_ready),
                web.post("/v2/models/{name}/infer", self.infer),
            ]
        )
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    def _model(self, request: web.Request) -> ServedModel:
        """The served model the request's path names; 404 (`_json_errors`) if none."""
        model = self.models.get(request.match_info["name"])
        if model is None:
            raise web.HTTPNotFound()
        return model

    async def _open(self, app: web.Application) -> None:
        self.session = ClientSession(
            connector=TCPConnector(limit=self.options.max_pending * len(self.models)),
            timeout=ClientTimeout(total=self.options.request_timeout),
        )

    async def _close(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def live(self, request: web.Request) -> web.Response:
        return web.json_response({"live": True})

    def engine_running(self) -> bool:
        """Whether the tritonserver process the server started still runs."""
        return self.engine is not None and self.engine.poll() is None

    async def health_ready(self, request: web.Request) -> web.Response:
        ready = self.ready and not self.draining and self.engine_running()
        return web.json_response({"ready": ready}, status=200 if ready else 503)

    async def model_ready(self, request: web.Request) -> web.Response:
        self._model(request)
        return await self.health_ready(request)

    async def metadata(self, request: web.Request) -> web.Response:
        """KServe v2's model metadata, with the task and a classifier's `labels`."""
        model = self._model(request)
        meta = model.meta
        tensors = [{"name": n, "datatype": "BYTES", "shape": [-1]} for n in meta["inputs"]]
        outputs = [
            {"name": name, "datatype": kind, "shape": [-1] if width == 1 else [-1, width]}
            for name, kind, width in model.outputs()
        ]
        answer = {
            "name": model.name,
            "versions": [str(meta.get("version", 1))],
            "platform": "albert-tf",
            "inputs": tensors,
            "outputs": outputs,
            "task": meta.get("task", "classify"),
        }
        if "labels" in meta:
            answer["labels"] = meta["labels"]
        return web.json_response(answer)

    async def infer(self, request: web.Request) -> web.Response:
        """Sheds, checks, forwards; the pending count is released whatever happens."""
        model = self._model(request)
        if self.closed or not self.ready or not self.engine_running():
            return _error(503, "the server is not ready", **{"Retry-After": "1"})
        if model.pending >= self.options.max_pending:
            return _error(503, "too many requests in flight", **{"Retry-After": "1"})
        model.pending += 1
        try:
            too_large = RequestError(413, f"body over {self.options.max_body_bytes} bytes")
            length = request.content_length
            if length is not None and length > self.options.max_body_bytes:
                raise too_large
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise too_large from None
            except ConnectionResetError:  # the client left mid-body: answered to no one
                raise RequestError(400, "the connection closed before the body ended") from None
            texts, shape, request_id = parse_request(body, model.meta["inputs"], self.options)
            return await self._forward(model, texts, shape, request_id)
        except RequestError as error:
            return _error(error.status, str(error))
        finally:
            model.pending -= 1

    async def _forward(
        self, model: ServedModel, texts: dict[str, list], shape: list, request_id: Any
    ) -> web.Response:
        """Triton's answer to `texts` for `model`, in the request's shapes (an empty batch: no
        call): one value per text shaped as the texts, k of them [n, k]."""
        n = len(next(iter(texts.values())))
        data = {name: [] for name, _, _ in model.outputs()}
        version = model.meta.get("version")
        if n:
            body = {
                "inputs": [
                    {"name": name, "datatype": "BYTES", "shape": [n, 1], "data": values}
                    for name, values in texts.items()
                ]
            }
            url = f"{self.upstream}/v2/models/{model.name}/infer"
            try:
                async with self.session.post(url, json=body) as response:
                    answer = await response.json(content_type=None)
                    status = response.status
            except (ClientError, asyncio.TimeoutError, ValueError) as error:
                return _error(
                    503 if not isinstance(error, asyncio.TimeoutError) else 504,
                    f"Triton did not answer: {type(error).__name__}",
                )
            if status != 200:
                return _error(status if status in (400, 503) else 500, answer.get("error", ""))
            data = {o["name"]: o["data"] for o in answer["outputs"]}
            version = answer.get("model_version", version)
        result = {
            "model_name": model.name,
            "model_version": str(version),
            "outputs": [
                {"name": name, "datatype": kind, "shape": shape if width == 1 else [n, width],
                 "data": data[name]}
                for name, kind, width in model.outputs()
            ],
        }  # fmt: skip
        if request_id is not None:
            result["id"] = request_id
        return web.json_response(result)
