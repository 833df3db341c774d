"""The live readers (`cloudzones report`, `plan ...` without -f, `kubectl zones`) against an API server whose
answers are hostile: not UTF-8, nested past what a JSON parser recurses into, of the wrong shape. What an API
server answers is input too: one line naming the list and the item, exit 1, never a traceback."""

from __future__ import annotations

import http.server
import json
import pathlib
import threading
from collections.abc import Iterator

import pytest
import yaml

from cloudzones import errors, kube
from cloudzones.cli import kubectl, main

ANSWERS = {
    "not UTF-8": (b'{"kind":"List","items":[{"metadata":{"name":"\xff"}}]}', "not JSON"),
    "nested past the parser": (b'{"kind":"List","items":[' + b"[" * 5000 + b"]" * 5000 + b"]}",
                               "JSON nested too deeply to read"),
    "items not a list": (b'{"kind":"List","items":5}', "a list whose items is a number"),
    "metadata not a mapping": (b'{"kind":"List","items":[],"metadata":[1]}', "a list whose metadata is a list"),
    "item not a mapping": (b'{"kind":"List","items":[1]}', "items[0]: expected a mapping, got a number"),
    "wrong field type": (json.dumps({"kind": "List", "items": [{"metadata": ["x"], "spec": 5}]}).encode(),
                         "items[0].metadata: expected a mapping, got a list"),
    # In a field no schema reads: a pod drops it, any other object is refused for it.
    "nested past 64": (json.dumps({"kind": "List", "items": [{"metadata": {"name": "n"},
                                                              "extra": json.loads("[" * 100 + "]" * 100)}]}).encode(),
                       "nested more than 64 levels deep"),
}
WATCH_ANSWERS = {
    "object not a mapping": (b'{"type": "ADDED", "object": 5}\n', "'ADDED' event whose object is a number"),
    "not an event": (b'{"type": "ADDED"}\n', "sent a line that is not a watch event"),
    "nested past the parser": (b'{"type": "ADDED", "object": ' + b"[" * 5000 + b"]" * 5000 + b"}\n",
                               "sent a line that is not a watch event"),
}
"""What a watch (an informer's, in every service) may be sent instead of events."""
COMMANDS = [["report"], ["plan", "outage", "--zone", "eastus-1"], ["plan", "locality", "-n", "longhorn-system"],
            ["plan", "replication", "--name", "logs", "-n", "loki"]]


class _Hostile(http.server.BaseHTTPRequestHandler):
    answer = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    """A kubeconfig for a loopback server that answers every GET with ``request.param``'s bytes."""
    handler = type("Handler", (_Hostile,), {"answer": {**ANSWERS, **WATCH_ANSWERS}[request.param][0]})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    yield str(path)
    server.shutdown()
    server.server_close()


class TestHostileApiServer:
    """Every live reader, every hostile answer: one line saying what is wrong, exit 1."""

    @pytest.mark.parametrize("api", list(ANSWERS), indirect=True)
    @pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
    def test_one_line(self, api: str, argv: list[str], request: pytest.FixtureRequest,
                      capsys: pytest.CaptureFixture[str]) -> None:
        """The CLI and the kubectl plugin answer with one error line naming the fault."""
        says = ANSWERS[request.node.callspec.params["api"]][1]
        assert main([*argv, "--kubeconfig", api]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error:" in err and says in err, err
        if argv == ["report"]:
            assert kubectl.main(["report", "--kubeconfig", api]) == 1
            assert says in capsys.readouterr().err


class TestHostileToServices:
    """The client the services' informers list and watch through: a hostile page or event is one KubeApiError
    (an informer logs it as one warning and retries), never an exception from inside the informer's thread."""

    @pytest.mark.parametrize("api", ["item not a mapping", "items not a list", "nested past the parser"],
                             indirect=True)
    def test_list(self, api: str, request: pytest.FixtureRequest) -> None:
        """Each page is checked before any item is keyed."""
        with pytest.raises(errors.KubeApiError) as info, kube.KubeClient.from_kubeconfig(api) as client:
            client.list(kube.NODES)
        assert ANSWERS[request.node.callspec.params["api"]][1] in str(info.value)

    @pytest.mark.parametrize("api", list(WATCH_ANSWERS), indirect=True)
    def test_watch(self, api: str, request: pytest.FixtureRequest) -> None:
        """Each line is checked before it becomes an event."""
        with pytest.raises(errors.KubeApiError) as info, kube.KubeClient.from_kubeconfig(api) as client:
            list(client.watch(kube.NODES, resource_version="1", timeout_seconds=5))
        assert WATCH_ANSWERS[request.node.callspec.params["api"]][1] in str(info.value)
