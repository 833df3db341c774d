"""requirements.lock (the image's dependencies, with hashes) covers pyproject's dependencies, at versions they allow."""

from __future__ import annotations

import pathlib
import re

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parent.parent


def locked() -> dict[str, str]:
    """Package (canonical name) → pinned version."""
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    return {canonicalize_name(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", text, re.M)}


class TestLockFile:
    """The lock is complete, pinned and hashed."""

    def test_every_dependency_pinned_within_its_range(self) -> None:
        """Each runtime dependency of pyproject.toml is locked at a version its specifier allows."""
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        pins = locked()
        for text in project["dependencies"]:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{name} is not in requirements.lock (run pip-compile, see the Dockerfile)"
            assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name], text)

    def test_every_pin_hashed(self) -> None:
        """Every pinned line carries at least one sha256 (pip --require-hashes needs them all)."""
        text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
        blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text)
        pinned = [b for b in blocks if re.match(r"[A-Za-z0-9_.-]+==", b)]
        assert len(pinned) == len(locked()) and all("--hash=sha256:" in b for b in pinned)
