"""Helpers for tests that run cloudzones commands as real processes, against a fake Azure on loopback.

`FakeAzure` is FakeArm (HTTPS) + FakeImds (instance documents and the managed-identity token
endpoint) + a cloud config that uses managed identity, and the environment a process needs to reach
them (``AZURE_POD_IDENTITY_AUTHORITY_HOST``, ``REQUESTS_CA_BUNDLE``): the real azure-identity and
azure-mgmt-compute code runs in the child, nothing is injected. `Service` runs one command, lets a
test block until a log line appears (stderr is read by a thread; no polling), and stops it with
SIGTERM, returning its exit code and log.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from cloudzones.testing.azure import FakeArm, FakeImds
from cloudzones.testing.tls import make_tls_files

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUBSCRIPTION, RESOURCE_GROUP, REGION = "3d2c4f0e-0000-4000-8000-000000000001", "rg", "eastus"


class FakeAzure:
    """FakeArm + FakeImds on loopback, a managed-identity cloud config, and the environment to reach them."""

    def __init__(self, folder: pathlib.Path) -> None:
        self.tls = make_tls_files(folder / "arm-tls")
        self.arm = FakeArm(subscription=SUBSCRIPTION, resource_group=RESOURCE_GROUP, location=REGION).start(tls=self.tls)
        self.imds = FakeImds().start()
        self.cloud_config = folder / "azure.json"
        self.cloud_config.write_text(json.dumps({
            "cloud": "AzurePublicCloud", "tenantId": "00000000-0000-4000-8000-00000000000t",
            "subscriptionId": SUBSCRIPTION, "resourceGroup": RESOURCE_GROUP, "location": REGION,
            "vmType": "vmss", "useManagedIdentityExtension": True, "resourceManagerEndpoint": self.arm.url}))
        self.env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": self.imds.identity_host,
                    "REQUESTS_CA_BUNDLE": str(self.tls.ca_file)}
        """Variables a child process needs: the managed-identity endpoint and the CA of FakeArm's certificate."""

    def provider_id(self, vm: str) -> str:
        """The ``spec.providerID`` of standalone VM ``vm``."""
        return (f"azure:///subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/"
                f"Microsoft.Compute/virtualMachines/{vm}")

    def stop(self) -> None:
        self.arm.stop()
        self.imds.stop()


@contextmanager
def fake_azure(folder: pathlib.Path) -> Iterator[FakeAzure]:
    """A `FakeAzure`, stopped on exit."""
    cloud = FakeAzure(folder)
    try:
        yield cloud
    finally:
        cloud.stop()


class Service:
    """``python -m cloudzones.cli --log-level INFO ARGS`` as a child process; a watchdog kills it after ``limit``."""

    def __init__(self, *args: str, env: Mapping[str, str] | None = None, limit: float = 120.0) -> None:
        self.args = args
        self.process = subprocess.Popen([sys.executable, "-m", "cloudzones.cli", "--log-level", "INFO", *args],
                                        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"stderr-{args[0]}")
        self._reader.start()
        self._watchdog = threading.Timer(limit, self.process.kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            self._new.put(line)
        self._new.put(None)

    def wait_for(self, needle: str, *, timeout: float = 60.0) -> str:
        """Block until a log line containing ``needle`` appears (fails if the process ends or time runs out)."""
        for line in self.lines:
            if needle in line:
                return line
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"{self.args[0]} exited ({self.process.wait()}) without logging {needle!r}:\n{self.log[-3000:]}")
            if needle in line:
                return line
        pytest.fail(f"{self.args[0]} logged no {needle!r} within {timeout:.0f} s:\n{self.log[-3000:]}")

    @property
    def log(self) -> str:
        """Everything written to stderr so far."""
        return "".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` (SIGTERM by default), wait up to 30 s (then kill), and return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(10)
        self._watchdog.cancel()
        if self.process.stderr is not None:
            self.process.stderr.close()
        return code

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
