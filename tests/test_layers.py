"""The three layers import one way: core ← adapters (kube/, providers/, storageclass/) ← runtime (services/, cli/).

Written by hand rather than as an import-linter contract because the core's rule is "the standard
library and the core, nothing else": import-linter forbids named packages, so every third-party
package would have to be listed (and a new one would slip through). The check reads every import
statement, function-level and ``TYPE_CHECKING`` ones included.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("cloudzones", "providers", "storageclass")
CORE = ("cloudzones", "cloudzones.topology", "cloudzones.labels", "cloudzones.errors", "cloudzones.findings",
        "cloudzones.retry", "cloudzones.cache", "cloudzones.nodelabels", "cloudzones.podzones", "cloudzones.shapes",
        "cloudzones.quantity", "cloudzones.placement", "cloudzones.workloads")
"""The pure core: modules, and packages with everything below them."""

# What each layer may import besides the standard library: (layer prefixes, allowed prefixes).
RULES: dict[str, tuple[str, ...]] = {
    "core": CORE,
    "documents": (*CORE, "yaml", "orjson", "msgspec"),
    "kube": (*CORE, "cloudzones.documents", "cloudzones.kube", "kubernetes", "urllib3"),
    "providers": (*CORE, "cloudzones.documents", "providers", "azure", "requests", "msal", "yaml", "urllib3"),
    "storageclass": (*CORE, "storageclass"),
    "services": (*CORE, "cloudzones.documents", "cloudzones.kube", "cloudzones.services", "providers",
                 "storageclass", "prometheus_client", "cryptography", "requests", "orjson"),
}


def layer_of(module: str) -> str | None:
    """The layer a module of ours belongs to (None: the CLI, simulation and testing tools, free to wire anything)."""
    if _under(module, CORE):
        return "core"
    for layer, prefix in (("documents", "cloudzones.documents"), ("kube", "cloudzones.kube"), ("services", "cloudzones.services"),
                          ("providers", "providers"), ("storageclass", "storageclass")):
        if _under(module, (prefix,)):
            return layer
    return None


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    # "cloudzones" alone is the root package (core), not "everything under cloudzones".
    return any(module == p or (p != "cloudzones" and module.startswith(p + ".")) for p in prefixes)


def modules() -> dict[str, pathlib.Path]:
    """Every module of the three packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(module: str, path: pathlib.Path) -> set[str]:
    """The absolute names a module imports (``from x import y`` gives ``x.y`` when ``x.y`` is a module of ours)."""
    ours = modules_cache()
    names = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.add(full if full in ours else base)
    return {n for n in names if n and n != "__future__"}


_MODULES: dict[str, pathlib.Path] = {}


def modules_cache() -> dict[str, pathlib.Path]:
    if not _MODULES:
        _MODULES.update(modules())
    return _MODULES


def stdlib(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in sys.stdlib_module_names


class TestLayers:
    """Every layer imports only downward, and only its own SDKs."""

    @pytest.mark.parametrize("module", sorted(m for m in modules() if layer_of(m)))
    def test_imports_flow_down(self, module: str) -> None:
        """A module imports the standard library and what its layer's rule allows, nothing else."""
        layer = layer_of(module)
        assert layer is not None
        allowed = RULES[layer]
        bad = sorted(n for n in imports_of(module, modules_cache()[module])
                     if not stdlib(n) and not _under(n, allowed) and n != "cloudzones")
        assert bad == [], f"{module} ({layer}) imports {bad}"

    def test_only_the_client_imports_kubernetes(self) -> None:
        """``kubernetes`` is imported by cloudzones.kube.client alone."""
        importers = sorted(m for m, p in modules_cache().items()
                           if any(n.split(".")[0] == "kubernetes" for n in imports_of(m, p)))
        assert importers == ["cloudzones.kube.client"]

    def test_every_module_has_a_layer_or_is_a_tool(self) -> None:
        """Nothing outside the layers but the command line, the simulation and the public fakes."""
        tools = ("cloudzones.cli", "cloudzones.simulation", "cloudzones.testing")
        loose = sorted(m for m in modules_cache() if layer_of(m) is None and not _under(m, tools))
        assert loose == []

    def test_the_checker_sees_a_violation(self, tmp_path: pathlib.Path) -> None:
        """An upward import in a core module is reported (the check can fail)."""
        path = tmp_path / "x.py"
        path.write_text("def f():\n    from cloudzones.kube import informer\n    import yaml\n")
        assert {"cloudzones.kube.informer", "yaml"} <= imports_of("cloudzones.topology", path)
        assert not _under("cloudzones.kube.informer", RULES["core"])


def test_no_async_kubernetes_client() -> None:
    """Nothing imports ``kubernetes.aio``: the image deletes it (68 MB), see the Dockerfile."""
    for module, path in modules().items():
        assert not any(name.startswith("kubernetes.aio") for name in imports_of(module, path)), module
