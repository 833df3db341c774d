"""The report page in a real browser: headless Chromium renders it, logs no console error, fetches nothing.

Chromium (Debian's ``chromium`` package) opens the page from a file with every background service
off and its proxy pointed at a loopback listener that counts connections: any fetch the page made
would arrive there. ``--dump-dom`` gives the document as rendered (the zone columns must be in it);
``--screenshot`` a PNG whose pixels must not be blank. Skipped when no Chromium is installed, unless
``CLOUDZONES_REQUIRE_CHROMIUM=1`` (which `.ci/run` sets after installing it) makes that a failure.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator

import pytest

from cloudzones.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "fixtures" / "plans" / "snapshot-3zones.yaml"


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium binary."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CLOUDZONES_REQUIRE_CHROMIUM") == "1":
        pytest.fail("CLOUDZONES_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)", pytrace=False)
    pytest.skip("no chromium on PATH (apt-get install chromium)")


# Chromium's own services, which it calls however it is told to keep quiet (time, component
# updates, accounts); anything else going through the proxy came from the page.
_BROWSER_HOSTS = (".google.com", ".googleapis.com", ".gvt1.com", ".gstatic.com")


class _Trap:
    """A loopback listener (the browser's proxy) that records the first line of every request made through it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(5)
            try:
                self.requests.append(conn.recv(1024).split(b"\r\n", 1)[0].decode("latin-1"))
            except OSError as exc:
                self.requests.append(f"unreadable: {exc}")
            conn.close()

    def from_page(self) -> list[str]:
        """Requests not to Chromium's own services."""
        def host(line: str) -> str:
            target = line.split(" ")[1] if line.count(" ") >= 2 else line
            return target.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]

        return [line for line in self.requests if not host(line).endswith(_BROWSER_HOSTS)]


@pytest.fixture
def trap() -> Iterator[_Trap]:
    """A proxy that records every connection."""
    listener = _Trap()
    yield listener
    listener.sock.close()


def run_chromium(binary: str, page: pathlib.Path, proxy: int, *extra: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` with nothing of its own talking to the network."""
    return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--disable-default-apps", "--disable-extensions", f"--proxy-server=127.0.0.1:{proxy}",
                           "--enable-logging=stderr", "--v=0", "--window-size=1200,1000", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False, cwd=page.parent)


def png_pixels(path: pathlib.Path) -> bytes:
    """The decompressed image data of a PNG (filter bytes included): enough to tell blank from drawn."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, chunks = 8, []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind = data[offset + 4:offset + 8]
        if kind == b"IDAT":
            chunks.append(data[offset + 8:offset + 8 + length])
        offset += 12 + length
    return zlib.decompress(b"".join(chunks))


class TestInChromium:
    """The page as a browser shows it."""

    def test_renders_offline(self, chromium: str, trap: _Trap, tmp_path: pathlib.Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """The zone columns are in the rendered DOM, nothing was fetched, no console error, the picture is not blank."""
        page = tmp_path / "zones.html"
        main(["report", "-f", str(SNAPSHOT), "--html", str(page)])
        capsys.readouterr()
        dom = run_chromium(chromium, page, trap.port, "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        for zone in ("eastus-1", "eastus-2", "eastus-3"):
            assert f'<th scope="col">{zone}</th>' in dom.stdout
        assert "StatefulSet/infra/zk" in dom.stdout and "quorum-lost" in dom.stdout
        shot = tmp_path / "zones.png"
        picture = run_chromium(chromium, page, trap.port, f"--screenshot={shot}")
        assert picture.returncode == 0 and shot.is_file(), picture.stderr[-2000:]
        console = [line for line in dom.stderr.splitlines() + picture.stderr.splitlines() if "CONSOLE" in line]
        assert console == [], console
        assert trap.from_page() == [], trap.requests
        pixels = png_pixels(shot)
        assert len(set(pixels)) > 16, "the screenshot is blank"

    def test_trap_sees_a_fetch(self, chromium: str, trap: _Trap, tmp_path: pathlib.Path) -> None:
        """The check can fail: a page with one external image is caught fetching it."""
        page = tmp_path / "fetching.html"
        page.write_text('<!DOCTYPE html><html><body><img src="http://cdn.example.invalid/x.png"></body></html>')
        run_chromium(chromium, page, trap.port, "--dump-dom")
        assert any("cdn.example.invalid" in line for line in trap.from_page()), trap.requests
