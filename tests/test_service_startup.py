"""Service start-up refuses bad settings at once: one line, exit 2 (usage) or 1 (configuration), never a traceback."""

from __future__ import annotations

import json
import pathlib
import signal
import socket
from collections.abc import Iterator

import pytest

from cloudzones.cli import main
from cloudzones.cli._service import selector_problem
from cloudzones.testing.tls import make_tls_files


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """Services install SIGTERM/SIGINT handlers; put pytest's back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def cloud_config(tmp_path: pathlib.Path) -> pathlib.Path:
    """A cloud config with managed identity (nothing is called at start-up)."""
    path = tmp_path / "azure.json"
    path.write_text(json.dumps({"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus",
                                "useManagedIdentityExtension": True}))
    return path


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``; it must exit 2 with one error line; returns that line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    lines = [line for line in err.splitlines() if line.startswith("cloudzones")]
    assert len(lines) == 1 and "Traceback" not in err  # after argparse's usage lines, one error line
    return lines[-1]


class TestFlags:
    """Each bad flag value is a usage error naming the flag and the value."""

    @pytest.mark.parametrize(("argv", "message"), [
        (["controller", "--workers", "0"], "argument --workers: '0' is not a whole number of at least 1"),
        (["controller", "--resync-period", "inf"], "argument --resync-period: 'inf' is not a number of seconds"),
        (["controller", "--resync-period", "nan"], "argument --resync-period: 'nan' is not a number of seconds"),
        (["controller", "--resync-period", "-5"], "argument --resync-period: '-5' is not a number of seconds"),
        (["controller", "--leader-election-namespace", ""], "argument --leader-election-namespace: '' is not a valid"),
        (["controller", "--leader-election-name", "Upper"], "argument --leader-election-name: 'Upper' is not a valid"),
        (["controller", "--annotate-pods", "a b=c"], "argument --annotate-pods: 'a b=c' is not a label selector"),
        (["controller", "--annotate-pods", " "], "is not a label selector: it is empty"),
        (["controller", "--metrics-port", "65536"], "argument --metrics-port: '65536' is not a port (1-65535)"),
        (["controller", "--metrics-port", "-1"], "argument --metrics-port: '-1' is not a port"),
        (["controller", "--metrics-address", "example.com"], "'example.com' is not an IP address to listen on"),
        (["provisioner", "--provisioner-name", "Azure Disk"], "argument --provisioner-name: 'Azure Disk' is not a "),
        (["provisioner", "--provisioner-name", "a/b/c"], "argument --provisioner-name: 'a/b/c' is not a provisioner"),
        (["provisioner", "--zone-mode", "random"], "argument --zone-mode: invalid choice: 'random'"),
        (["provisioner", "--workers", "-1"], "argument --workers: '-1' is not a whole number of at least 1"),
        (["node-agent", "--interval", "0"], "argument --interval: '0' is not a number of seconds above 0"),
        (["node-agent", "--imds-url", "169.254.169.254"], "'169.254.169.254' is not an http:// or https:// URL"),
        (["webhook", "--tls-cert-file", "c", "--tls-key-file", "k", "--port", "0"], "'0' is not a port (1-65535)"),
        (["webhook", "--tls-cert-file", "c", "--tls-key-file", "k", "--address", "::g"], "'::g' is not an IP address"),
        (["webhook", "--tls-cert-file", "c", "--tls-key-file", "k", "--review-budget", "0"],
         "argument --review-budget: '0' is not a number of seconds above 0"),
        (["webhook", "--tls-cert-file", "c", "--tls-key-file", "k", "--review-budget", "10"],
         "argument --review-budget: '10' is not below the server's 10 s request deadline"),
    ])
    def test_refused(self, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """The one error line names the flag and the offending value."""
        assert message in usage_error(argv, capsys)

    @pytest.mark.parametrize(("selector", "problem"), [
        ("app=web,tier in (a,b),!legacy,env!=prod,x", ""),
        ("cloudzones.io/zone-injection=enabled", ""),
        ("a=b c", "cannot read 'a=b c'"),
        ("a in (b,-c)", "'-c' is not a label value"),
        ("-a=b", "'-a' is not a label key"),
        ("a=" + "x" * 64, "is not a label value"),
    ])
    def test_selector_syntax(self, selector: str, problem: str) -> None:
        """kubectl's selector syntax is accepted; bad keys, values and words are named."""
        assert (selector_problem(selector) == "") if not problem else (problem in selector_problem(selector))


class TestStartUp:
    """Mistakes that only show when the service starts stop it before it serves."""

    def test_cloud_config_without_credentials(self, tmp_path: pathlib.Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """The controller refuses a cloud config without credentials (exit 1) before touching Kubernetes."""
        path = tmp_path / "azure.json"
        path.write_text(json.dumps({"subscriptionId": "s", "resourceGroup": "rg", "location": "eastus"}))
        assert main(["controller", "--cloud-config", str(path), "--metrics-port", "0"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no Azure credentials in the cloud config" in err

    @pytest.mark.parametrize(("missing", "message"), [
        ("location", "no location in the cloud config"),
        ("resourceGroup", "no resourceGroup in the cloud config"),
        ("useManagedIdentityExtension", "no Azure credentials in the cloud config"),
    ])
    def test_provisioner_cloud_config(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path, missing: str,
                                      message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """The provisioner needs credentials, a resource group and a location for its disks: one line, exit 1."""
        settings = json.loads(cloud_config.read_text())
        del settings[missing]
        cloud_config.write_text(json.dumps(settings))
        assert main(["provisioner", "--cloud-config", str(cloud_config), "--metrics-port", "0"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err

    def test_kubeconfig_not_a_mapping(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A kubeconfig holding a list is one line, not the client's TypeError."""
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text("- a\n")
        code = main(["controller", "--cloud-config", str(cloud_config), "--kubeconfig", str(kubeconfig),
                     "--metrics-port", "0"])
        err = capsys.readouterr().err
        assert code == 1 and err.count("\n") == 1 and "expected a mapping (apiVersion: v1, kind: Config), got a list" in err

    def test_tls_file_missing(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
        """A missing certificate is named."""
        code = main(["webhook", "--cloud-config", str(cloud_config), "--tls-cert-file", str(tmp_path / "none.crt"),
                     "--tls-key-file", str(tmp_path / "none.key"), "--port", "8443"])
        err = capsys.readouterr().err
        assert code == 1 and f"--tls-cert-file {tmp_path / 'none.crt'}: cannot read: No such file" in err

    def test_tls_pair_mismatched(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A certificate with another pair's key: exit 2, both files named."""
        one, two = make_tls_files(tmp_path / "one"), make_tls_files(tmp_path / "two")
        code = main(["webhook", "--cloud-config", str(cloud_config), "--tls-cert-file", str(one.cert_file),
                     "--tls-key-file", str(two.key_file), "--address", "127.0.0.1", "--port", str(free_port())])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "not a certificate and its key" in err

    def test_port_in_use(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
        """A port someone else listens on: exit 2 naming the port."""
        tls = make_tls_files(tmp_path / "tls")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            code = main(["webhook", "--cloud-config", str(cloud_config), "--tls-cert-file", str(tls.cert_file),
                         "--tls-key-file", str(tls.key_file), "--address", "127.0.0.1", "--port", str(port)])
        err = capsys.readouterr().err
        assert code == 2 and f"--port {port} on 127.0.0.1: cannot listen: Address already in use" in err


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
