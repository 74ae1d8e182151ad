"""`export --finetuned DIR --triton` and `albert-tf serve`: a real Triton server on loopback,
started and stopped here, and each fault a client can bring (issue 52, item 4).

The serving environment (nvidia-pytriton's Triton, ONNX Runtime) is made once by
`albert-tf serve --create-env` where it is missing ($ALBERT_TF_SERVE_ENV, else
~/.cache/albert-tf/serve-env; needs PyPI the first time).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TEXTS = ["the plot was great", "awful", "the film was awful and the cast was great " * 3]
LIMITS = dict(max_texts=8, max_text_bytes=300, max_body_bytes=4096, max_pending=4)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _request(url: str, body: bytes | None = None, timeout: float = 30) -> tuple[int, dict]:
    """(status, JSON answer) of GET (no body) or POST `url`."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _infer_body(texts: list, shape: list | None = None, **tensor) -> bytes:
    tensor = {
        "name": "text",
        "datatype": "BYTES",
        "shape": shape or [len(texts)],
        "data": texts,
        **tensor,
    }
    return json.dumps({"inputs": [tensor]}).encode()


class Server:
    """`albert-tf serve` of `directory` (and `more`) in a process of its own on a free loopback
    port, ready once built.

    `internal_ports`: give Triton's ports too (free ones, `flags` may name them); False leaves
    them to `serve`. `wait`: False returns at once, ready or not. `names`: one `--model-name`
    per directory.
    """

    def __init__(
        self,
        directory: Path,
        *more: Path,
        internal_ports: bool = True,
        wait: bool = True,
        names: tuple = (),
        **flags,
    ):
        self.port, grpc, metrics, triton = _free_ports(4)
        ports = dict(grpc_port=grpc, metrics_port=metrics, triton_port=triton)
        options = {**(ports if internal_ports else {}), **LIMITS, "shutdown_grace": 0.5,
                   "poll_seconds": 0.5, **flags}  # fmt: skip
        self.triton_port = options.get("triton_port")
        args = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
        args += [f"--model-name={name}" for name in names]
        self.log = directory.parent / f"serve-{self.port}.log"
        command = [
            sys.executable, "-m", "albert_tf.cli", "serve", str(directory), *map(str, more),
            f"--port={self.port}", *args,
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        self.infer_url = f"{self.url}/v2/models/classifier/infer"
        deadline = time.monotonic() + 120
        while wait and self.get("/v2/health/ready")[0] != 200:
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.2)

    def get(self, path: str) -> tuple[int, dict]:
        try:
            return _request(self.url + path, timeout=5)
        except OSError:
            return 0, {}

    def infer(self, body: bytes, model: str = "classifier") -> tuple[int, dict]:
        return _request(f"{self.url}/v2/models/{model}/infer", body)

    def model_runs(self) -> int:
        """How many requests Triton's model has run (its statistics)."""
        url = f"http://127.0.0.1:{self.triton_port}/v2/models/classifier/stats"
        stats = _request(url)[1]["model_stats"]
        return sum(s["inference_stats"]["success"]["count"] for s in stats)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


@pytest.fixture(scope="module")
def server(finetuned):
    served = finetuned.parent / "served"
    shutil.copytree(finetuned / "triton", served / "triton")
    running = Server(served)
    yield running
    assert running.stop() == 0


# int8 activations are quantized per call, on a scale set by the batch's largest value, so a
# text's probabilities move by a different amount in each batch it comes in: over 300 batches
# of 1 to 8 of the probe texts and TEXTS, up to 2.9x the export's record (one batch of its 35
# probe texts).
BATCH_FACTOR = 4


def _served_tolerance(finetuned_dir: Path) -> float:
    """How far served probabilities may be from `predict`'s: what the export measured of the
    same file against `predict` (its report), times BATCH_FACTOR."""
    report = json.loads((finetuned_dir / "triton" / "report.json").read_text())
    return BATCH_FACTOR * report["against_predict"]["probabilities_max_abs_diff"]


def _predict(finetuned_dir: Path, texts: list[str]) -> np.ndarray:
    """`predict`'s probabilities of `texts` (albert_tf.export.triton.repository reads them so)."""
    from albert_tf.export.triton.repository import _predict_probabilities
    from albert_tf.finetune.predict import load_finetuned

    return _predict_probabilities(load_finetuned(finetuned_dir), {"text": texts})


def test_the_repository_holds_the_model_its_config_and_its_agreement(finetuned):
    repository = finetuned / "triton"
    config = (repository / "classifier" / "config.pbtxt").read_text()
    for part in ("dynamic_batching", "KIND_CPU", "max_queue_size", '"intra_op_threads"'):
        assert part in config
    assert sorted(p.name for p in (repository / "classifier" / "1").iterdir()) == [
        "model.onnx",
        "model.py",
    ]
    report = json.loads((repository / "report.json").read_text())
    assert report["labels"] == ["neg", "pos"] and report["inputs"] == ["text"]
    assert report["against_predict"]["labels_equal"] is True
    # int8 moves a real model's probabilities by up to about 1e-2, this tiny one's by about 5e-5
    assert report["against_predict"]["probabilities_max_abs_diff"] < 1e-3
    assert report["nul_substitute"] == "fdd0"


def test_infer_equals_predict_in_both_shapes(server, finetuned):
    want = _predict(finetuned, TEXTS)
    labels = ["neg", "pos"]
    for shape in ([len(TEXTS)], [len(TEXTS), 1]):
        status, answer = server.infer(_infer_body(TEXTS, shape))
        assert status == 200, answer
        outputs = {o["name"]: o for o in answer["outputs"]}
        assert outputs["label"]["shape"] == shape
        assert outputs["label"]["data"] == [labels[i] for i in want.argmax(axis=1)]
        assert outputs["probabilities"]["shape"] == [len(TEXTS), 2]
        got = np.array(outputs["probabilities"]["data"]).reshape(-1, 2)
        np.testing.assert_allclose(got, want, rtol=0, atol=_served_tolerance(finetuned))
    assert server.infer(_infer_body(["", " "]))[0] == 200  # predict skips such rows
    assert server.get("/v2/health/ready") == (200, {"ready": True})
    assert server.get("/v2/models/classifier")[1]["labels"] == labels


def test_limits_answer_413_before_the_model_runs(server):
    runs = server.model_runs()
    too_many = _infer_body(["a"] * 9)
    too_long = _infer_body(["word " * 61])
    too_big = json.dumps({"inputs": [], "padding": "x" * 5000}).encode()
    for body in (too_many, too_long, too_big):
        status, answer = server.infer(body)
        assert status == 413, answer
    assert server.model_runs() == runs


@pytest.mark.parametrize(
    "body",
    [
        b'{"inputs": [',
        b"[]",
        json.dumps({"inputs": []}).encode(),
        _infer_body(["a"], name="txt"),
        _infer_body(["a"], datatype="FP32"),
        _infer_body([1.5]),
        _infer_body(["a", "b"], shape=[3]),
    ],
    ids=["truncated", "not-an-object", "no-text", "unknown-input", "fp32", "number", "shape"],
)
def test_malformed_requests_get_400_before_the_model_runs(server, body):
    runs = server.model_runs()
    status, answer = server.infer(body)
    assert status == 400 and answer["error"]
    assert server.model_runs() == runs


def test_every_error_is_json_in_kserve_v2s_shape(server):
    """aiohttp's own 404 (an unknown model) and 405 (GET on infer) too, not plain text."""
    cases = [
        ("/v2/models/other/infer", _infer_body(["a"]), 404),
        ("/v2/models/other", None, 404),
        ("/v2/models/classifier/infer", None, 405),
    ]
    for path, body, want in cases:
        request = urllib.request.Request(server.url + path, data=body)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        error = caught.value
        assert error.code == want
        assert error.headers.get_content_type() == "application/json"
        assert set(json.loads(error.read())) == {"error"}
    assert error.headers["Allow"] == "POST"


def test_a_fault_of_the_front_is_answered_in_json():
    """A fault inside a route (here metadata read before the model is known) is a 500 in
    KServe v2's shape, not aiohttp's plain text."""
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from albert_tf.runtimes.triton.front import Front, ServeOptions

    async def ask() -> tuple[int, str, dict]:
        async with TestClient(TestServer(Front(ServeOptions()).app())) as client:
            response = await client.get("/v2/models/classifier")
            return response.status, response.content_type, await response.json()

    assert asyncio.run(ask()) == (500, "application/json", {"error": "internal error: KeyError"})


def test_an_empty_batch_gets_empty_outputs(server):
    runs = server.model_runs()
    status, answer = server.infer(_infer_body([]))
    assert status == 200
    assert [(o["shape"], o["data"]) for o in answer["outputs"]] == [([0], []), ([0, 2], [])]
    assert server.model_runs() == runs


def test_text_faults_get_predicts_answer(server, finetuned, tmp_path):
    """A NUL is read as `predict` reads it; invalid UTF-8 and lone surrogates are refused, as
    `predict` refuses a file that is not UTF-8 (and no UTF-8 file can hold a lone surrogate)."""
    from albert_tf.cli import main

    status, answer = server.infer(_infer_body(["a\x00b", "the \x00 film"]))
    assert status == 200, answer
    got = np.array(answer["outputs"][1]["data"]).reshape(-1, 2)
    want = _predict(finetuned, ["a\x00b", "the \x00 film"])
    np.testing.assert_allclose(got, want, rtol=0, atol=_served_tolerance(finetuned))
    invalid = _infer_body(["a?b"]).replace(b"a?b", b"a\xffb")
    surrogate = _infer_body(["a\ud800b"])  # json.dumps escapes it as \ud800
    for body in (invalid, surrogate):
        status, answer = server.infer(body)
        assert status == 400, answer
    bad_file = tmp_path / "bad.tsv"
    bad_file.write_bytes(b"sentence\tlabel\na\xffb\tpos\n")
    assert main(["predict", "--checkpoint", str(finetuned), "--input", str(bad_file)]) == 2


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_clients_that_disconnect_leak_nothing(server):
    body = _infer_body(TEXTS)
    head = (
        f"POST /v2/models/classifier/infer HTTP/1.1\r\nHost: x\r\n"
        f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
    ).encode()

    def leave_midway(times: int) -> None:
        for i in range(times):
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.sendall(head + (body[: len(body) // 2] if i % 2 else body))
        time.sleep(1.0)

    server.infer(body)
    leave_midway(10)  # the front's pool of connections to Triton grows to what this load needs
    fds = _open_fds(server.process.pid)
    leave_midway(30)  # a leak would grow with each client; the pool does not
    assert _open_fds(server.process.pid) <= fds + 2
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(server.infer(body)[0])) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 4  # max_pending 4: no slot was left taken


def _hammer(url: str, body: bytes, stop: threading.Event, statuses: Counter, answers=None):
    while not stop.is_set():
        try:
            status, answer = _request(url, body)
        except OSError as error:
            status, answer = type(error).__name__, None
        statuses[status] += 1
        if answers is not None and status == 200:
            answers.append(answer["outputs"][0]["data"])


def test_overload_is_shed_with_503(server):
    statuses: Counter = Counter()
    stop = threading.Event()
    body = _infer_body(["the film was great"] * 8)
    threads = [
        threading.Thread(target=_hammer, args=(server.infer_url, body, stop, statuses))
        for _ in range(24)
    ]
    for t in threads:
        t.start()
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join()
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[200] and statuses[503], statuses


def _upper_labels(tensor) -> bool:
    """Replaces a string tensor holding the labels neg and pos by NEG and POS; whether it did."""
    from onnx import numpy_helper

    values = [v.decode() if isinstance(v, bytes) else v for v in numpy_helper.to_array(tensor)]
    if sorted(values) != ["neg", "pos"]:
        return False
    upper = np.array([v.upper().encode() for v in values], dtype=object)
    tensor.CopyFrom(numpy_helper.from_array(upper, tensor.name))
    return True


def _relabelled(triton: Path, target: Path) -> None:
    """Replaces `target`, as `export` does, by a copy of the repository `triton` whose model
    calls its labels NEG and POS."""
    import onnx

    from albert_tf.io_utils import atomic_dir

    with atomic_dir(target, overwrite=True) as tmp:
        shutil.copytree(triton, tmp, dirs_exist_ok=True)
        path = tmp / "classifier" / "1" / "model.onnx"
        model = onnx.load(str(path))
        graphs, changed = [model.graph], 0
        while graphs:
            graph = graphs.pop()
            graphs += [a.g for node in graph.node for a in node.attribute if a.HasField("g")]
            strings = [i for i in graph.initializer if i.data_type == onnx.TensorProto.STRING]
            changed += sum(_upper_labels(tensor) for tensor in strings)
        assert changed == 1
        onnx.save(model, str(path))


def test_replacing_the_model_while_serving_fails_no_request(server, finetuned):
    statuses: Counter = Counter()
    answers: list = []
    stop = threading.Event()
    body = _infer_body(["the plot was great"])
    threads = [
        threading.Thread(target=_hammer, args=(server.infer_url, body, stop, statuses, answers))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)
    _relabelled(finetuned / "triton", finetuned.parent / "served" / "triton")
    deadline = time.monotonic() + 60
    while not (answers and answers[-1][0].isupper()) and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    assert answers[-1][0] in ("NEG", "POS")
    assert set(statuses) == {200}, statuses


def test_sigterm_not_ready_then_drains_then_exits_0(finetuned):
    running = Server(finetuned, shutdown_grace=2.0)
    statuses: Counter = Counter()
    stop = threading.Event()
    body = _infer_body(TEXTS * 2)
    threads = [
        threading.Thread(target=_hammer, args=(running.infer_url, body, stop, statuses))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)
    running.process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert running.get("/v2/health/ready")[0] == 503
    during_grace = running.infer(_infer_body(["still served"]))[0]
    code = running.process.wait(30)
    took = time.monotonic() - sent
    stop.set()
    for t in threads:
        t.join()
    assert code == 0, running.log.read_text()
    assert during_grace == 200
    assert took < 20
    # Answered requests were answered whole; after the grace new ones are refused or find
    # the port closed.
    assert set(statuses) <= {200, 503, "URLError", "ConnectionRefusedError",
                             "RemoteDisconnected", "ConnectionResetError"}, statuses  # fmt: skip


class Stranger:
    """An HTTP server on 127.0.0.1:`port` (0: a free one) that answers every GET and POST with
    200 and `{}`, counting them: what a foreign server on Triton's port looks like."""

    def __init__(self, port: int = 0):
        import http.server

        stranger = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                stranger.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = answer

            def log_message(self, *args):
                pass

        self.requests = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    children = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _labels(server: Server) -> list[str]:
    status, answer = server.infer(_infer_body(TEXTS))
    assert status == 200, answer
    return answer["outputs"][0]["data"]


def test_two_servers_given_only_a_port_answer_with_their_own_models(finetuned, tmp_path):
    """Issue 63: a second `serve` with only --port once answered with the first one's model.
    Each now starts its own Triton on ports chosen free, trusts it only once it returns the
    server's token, and stops in one line when it dies; a foreign server on Triton's default
    HTTP port (8003) is never asked."""
    try:
        stranger = Stranger(8003)
    except OSError:  # another process holds 8003: a stranger too, only not one that counts
        stranger = None
    upper = tmp_path / "upper" / "triton"
    _relabelled(finetuned / "triton", upper)
    first = Server(finetuned, internal_ports=False, instances=1)
    try:
        second = Server(upper.parent, internal_ports=False, instances=1)
        try:
            assert set(_labels(first)) <= {"neg", "pos"}
            assert set(_labels(second)) <= {"NEG", "POS"}
            assert stranger is None or stranger.requests == 0
            (triton,) = _children(second.process.pid)
            os.kill(triton, signal.SIGKILL)
            code = second.process.wait(30)
            assert second.get("/v2/health/ready")[0] in (0, 503)
        finally:
            second.stop()
        lines = second.log.read_text().strip().splitlines()
        assert code == 2
        assert lines[-1].startswith("albert-tf serve: error: tritonserver exited (-9)")
        assert set(_labels(first)) <= {"neg", "pos"}
    finally:
        assert first.stop() == 0
        if stranger is not None:
            stranger.close()


def test_a_foreign_server_on_tritons_port_is_never_trusted(finetuned):
    """A stranger answering 200 to everything on --triton-port: the front asks it and is never
    ready; its Triton cannot bind the port, and `serve` stops in one line."""
    stranger = Stranger()
    try:
        running = Server(finetuned, wait=False, triton_port=stranger.port, instances=1)
        statuses = set()
        deadline = time.monotonic() + 120
        while running.process.poll() is None and time.monotonic() < deadline:
            statuses.add(running.get("/v2/health/ready")[0])
            time.sleep(0.1)
        code = running.stop()
    finally:
        stranger.close()
    lines = running.log.read_text().strip().splitlines()
    assert code == 2, lines
    assert lines[-1].startswith("albert-tf serve: error: tritonserver exited (1)")
    assert "already in use" in lines[-1]
    assert stranger.requests > 0 and statuses <= {0, 503}, statuses


def test_serve_refuses_in_one_line(tmp_path, monkeypatch, capsys):
    from albert_tf.cli import main

    assert main(["serve"]) == 2
    assert main(["serve", str(tmp_path)]) == 2
    assert "--triton" in capsys.readouterr().err
    monkeypatch.setenv("ALBERT_TF_SERVE_ENV", str(tmp_path / "none"))
    (tmp_path / "triton" / "classifier").mkdir(parents=True)
    (tmp_path / "triton" / "classifier" / "config.pbtxt").write_text("")
    assert main(["serve", str(tmp_path)]) == 2
    assert "albert-tf serve --create-env" in capsys.readouterr().err
    assert main(["export", "--checkpoint", str(tmp_path), "--output", "x", "--triton"]) == 2
