"""Tests for deploy/: every manifest parses and is well-formed, and RBAC grants exactly the verbs the code calls."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import pathlib
from collections.abc import Iterable
from typing import Any

import kubernetes.client
import pytest

from cloudzones import cli, labels
from tests.manifests import Call, build, containers, find, kube_calls, kustomization, load

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
NAMESPACE = "cloudzones-system"
CONTROLLER, NODE_AGENT, WEBHOOK = "cloudzones-controller", "cloudzones-node-agent", "cloudzones-webhook"
PROVISIONER = "cloudzones-provisioner"
PROVISIONER_MODULES = ("cloudzones/services/provisioner.py", "cloudzones/kube/leader.py", "cloudzones/kube/events.py")
"""The calls of `cloudzones provisioner` (deploy/provisioner/, a component like the annotator)."""

# The modules whose Kubernetes calls each ServiceAccount makes (the annotator's only with --annotate-pods).
SERVICE_ACCOUNT_MODULES: dict[str, tuple[str, ...]] = {
    CONTROLLER: ("cloudzones/services/controller.py", "cloudzones/kube/leader.py", "cloudzones/kube/events.py"),
    NODE_AGENT: ("cloudzones/services/nodeagent.py", "cloudzones/kube/events.py"),
    WEBHOOK: (),
}
ANNOTATOR_MODULES = ("cloudzones/services/annotator.py",)

# Modules still being written: while such a file is missing, the calls listed here stand in for it.
# Delete a module's entry when the file lands (the test then reads the real calls and says so).
PENDING_MODULES: dict[str, set[tuple[str, str, str]]] = {}


def used_by(modules: Iterable[str]) -> set[Call]:
    """The calls of the modules, PENDING_MODULES standing in for the missing ones."""
    result: set[Call] = set()
    for module in modules:
        path = ROOT / module
        result |= kube_calls(path.read_text(encoding="utf-8"), module) if path.exists() else PENDING_MODULES[module]
    return result


def granted(docs: list[dict[str, Any]], account: str) -> set[Call]:
    """The (group, resource, verb) triples bound to the ServiceAccount ``account`` of NAMESPACE."""
    result: set[Call] = set()
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} not in binding["subjects"]:
            continue
        role = find(docs, binding["roleRef"]["kind"], binding["roleRef"]["name"])
        for rule in role["rules"]:
            result.update((g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"])
    return result


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return build(DEPLOY)


@pytest.fixture(scope="module")
def with_annotator() -> list[dict[str, Any]]:
    return build(DEPLOY / "with-annotator")


@pytest.fixture(scope="module")
def with_provisioner() -> list[dict[str, Any]]:
    return build(DEPLOY / "with-provisioner")


class TestScanner:
    """kube_calls, the source scan behind the RBAC check."""

    def test_finds_calls(self) -> None:
        """Verbs with kube.X or a plural, Informers (list + watch) and subresources are found; dict.get is not."""
        source = ("x = informer.Informer(self.client, kube.PODS, label_selector=s)\n"
                  "client.get(kube.NODES, 'n'); self.client.patch('nodes', n, p, subresource='status')\n"
                  "self.client.update(kube.LEASES, body, namespace=ns); labels.get('a'); d.get(k)\n")
        assert kube_calls(source) == {("", "pods", "list"), ("", "pods", "watch"), ("", "nodes", "get"),
                                      ("", "nodes/status", "patch"), ("coordination.k8s.io", "leases", "update")}

    def test_refuses_indirect_resources(self) -> None:
        """A client call whose resource is a variable fails the scan instead of going unseen."""
        with pytest.raises(AssertionError, match="indirectly"):
            kube_calls("self.client.delete(resource, name)")

    def test_pending_modules_are_missing(self) -> None:
        """PENDING_MODULES names only missing files; every other listed module exists."""
        listed = {m for modules in SERVICE_ACCOUNT_MODULES.values() for m in modules} | set(ANNOTATOR_MODULES)
        for module in sorted(listed):
            exists = (ROOT / module).exists()
            assert exists != (module in PENDING_MODULES), (
                f"{module} exists now: remove it from PENDING_MODULES" if exists else f"{module} is missing")
        assert set(PENDING_MODULES) <= listed


class TestRbac:
    """The ClusterRoles and Roles grant exactly what the code calls."""

    @pytest.mark.parametrize("account", sorted(SERVICE_ACCOUNT_MODULES))
    def test_base_grants_what_is_used(self, base: list[dict[str, Any]], account: str) -> None:
        """Without the annotator: granted == used, for every ServiceAccount."""
        assert granted(base, account) == used_by(SERVICE_ACCOUNT_MODULES[account])

    def test_annotator_grants_what_is_used(self, with_annotator: list[dict[str, Any]]) -> None:
        """With the annotator the controller's rights are exactly its modules' calls plus the annotator's."""
        assert granted(with_annotator, CONTROLLER) == used_by(SERVICE_ACCOUNT_MODULES[CONTROLLER] + ANNOTATOR_MODULES)
        for account in (NODE_AGENT, WEBHOOK):
            assert granted(with_annotator, account) == used_by(SERVICE_ACCOUNT_MODULES[account])

    def test_provisioner_grants_what_is_used(self, base: list[dict[str, Any]],
                                             with_provisioner: list[dict[str, Any]]) -> None:
        """With the provisioner its own account has exactly its modules' calls; nobody else gains a right."""
        assert granted(with_provisioner, PROVISIONER) == used_by(PROVISIONER_MODULES)
        assert granted(base, PROVISIONER) == set()
        for account in SERVICE_ACCOUNT_MODULES:
            assert granted(with_provisioner, account) == granted(base, account)

    def test_provisioner_lease_in_its_namespace(self, with_provisioner: list[dict[str, Any]]) -> None:
        """Its Lease rights come through a RoleBinding in cloudzones-system; claims and PVs through its ClusterRole."""
        binding = find(with_provisioner, "RoleBinding", "cloudzones-provisioner-leader-election")
        assert binding["metadata"]["namespace"] == NAMESPACE and binding["roleRef"]["kind"] == "Role"

    def test_pods_only_with_annotator(self, base: list[dict[str, Any]], with_annotator: list[dict[str, Any]]) -> None:
        """Pod rights live only in the annotator's ClusterRole: exactly its pod calls, and Events on the pods."""
        assert not any(r[1].startswith("pods") for a in SERVICE_ACCOUNT_MODULES for r in granted(base, a))
        role = find(with_annotator, "ClusterRole", "cloudzones-pod-annotator")
        rules = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                 for v in rule["verbs"]}
        assert rules == {c for c in used_by(ANNOTATOR_MODULES) if c[1].startswith("pods")} | {("", "events", "create")}
        assert {("", "pods", v) for v in ("get", "list", "watch", "patch")} | {("", "events", "create")} == rules

    def test_node_events_only_in_default(self, base: list[dict[str, Any]]) -> None:
        """Without the annotator, Events may be created only in "default" (where Events on nodes live)."""
        for role in (d for d in base if d["kind"] in ("Role", "ClusterRole")):
            if any("events" in rule["resources"] for rule in role["rules"]):
                assert (role["kind"], role["metadata"].get("namespace")) == ("Role", "default")
        binding = find(base, "RoleBinding", "cloudzones-node-events")
        assert binding["metadata"]["namespace"] == "default"
        assert {s["name"] for s in binding["subjects"]} == {CONTROLLER, NODE_AGENT}

    def test_leases_namespaced(self, with_annotator: list[dict[str, Any]]) -> None:
        """Lease rights come from a Role in cloudzones-system, never a ClusterRole."""
        for role in (d for d in with_annotator if d["kind"] in ("Role", "ClusterRole")):
            if any("leases" in rule["resources"] for rule in role["rules"]):
                assert (role["kind"], role["metadata"].get("namespace")) == ("Role", NAMESPACE)

    def test_no_wildcards(self, with_annotator: list[dict[str, Any]]) -> None:
        """No rule uses '*' or resourceNames-free escalation verbs (bind, escalate, impersonate)."""
        for role in (d for d in with_annotator if d["kind"] in ("Role", "ClusterRole")):
            for rule in role["rules"]:
                values = {*rule["apiGroups"], *rule["resources"], *rule["verbs"]}
                assert not values & {"*", "bind", "escalate", "impersonate"}, role["metadata"]["name"]

    def test_webhook_has_no_rights(self, with_annotator: list[dict[str, Any]]) -> None:
        """The webhook's ServiceAccount is bound to nothing and its token is not mounted."""
        assert granted(with_annotator, WEBHOOK) == set()
        assert find(with_annotator, "ServiceAccount", WEBHOOK)["automountServiceAccountToken"] is False
        pod = find(with_annotator, "Deployment", WEBHOOK)["spec"]["template"]["spec"]
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == (WEBHOOK, False)


class TestManifests:
    """Files, kinds and required fields."""

    def test_every_file_parses(self) -> None:
        """Every YAML document under deploy/ is a mapping with apiVersion and kind (and a name unless kustomize's)."""
        files = sorted(DEPLOY.rglob("*.yaml"))
        assert len(files) >= 10
        for path in files:
            docs = load(path)
            assert docs, path
            for doc in docs:
                assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), path
                if not doc["apiVersion"].startswith("kustomize.config.k8s.io/"):
                    assert doc["metadata"]["name"], path

    def test_every_file_is_used(self) -> None:
        """Each manifest is reached by a kustomization, except the examples."""
        reached: set[pathlib.Path] = set()
        for kfile in DEPLOY.rglob("kustomization.yaml"):
            reached.add(kfile)
            reached.update(path for entry in kustomization(kfile.parent).get("resources") or []
                           if (path := (kfile.parent / entry).resolve()).is_file())
        examples = set((DEPLOY / "examples").glob("*.yaml"))
        assert examples and set(DEPLOY.rglob("*.yaml")) - examples == reached

    def test_schema(self, with_annotator: list[dict[str, Any]], with_provisioner: list[dict[str, Any]]) -> None:
        """Every built object and example validates against the client's models (unknown fields refused)."""
        extra = [d for d in with_provisioner if d not in with_annotator]
        docs = (with_annotator + extra + load(DEPLOY / "examples" / "zone-injection.yaml")
                + load(DEPLOY / "examples" / "storageclass-zoned.yaml"))
        kinds = {d["kind"] for d in docs}
        assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                "Deployment", "DaemonSet", "Service", "MutatingWebhookConfiguration", "Certificate",
                "Issuer"} <= kinds
        for doc in docs:
            if doc["apiVersion"].startswith("cert-manager.io/"):
                continue  # not in the client; checked in TestWebhook
            model = getattr(kubernetes.client, doc["apiVersion"].rsplit("/", 1)[-1].capitalize() + doc["kind"])
            model.model_validate(doc)

    def test_namespace(self, with_annotator: list[dict[str, Any]]) -> None:
        """Namespaced objects are in cloudzones-system (created here) but node-Event rights in "default"; unique names."""
        assert find(with_annotator, "Namespace", NAMESPACE)
        cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}
        in_default = {("Role", "cloudzones-node-events"), ("RoleBinding", "cloudzones-node-events")}
        for doc in with_annotator:
            want = (None if doc["kind"] in cluster_scoped else
                    "default" if (doc["kind"], doc["metadata"]["name"]) in in_default else NAMESPACE)
            assert doc["metadata"].get("namespace") == want, doc
        ids = [(d["kind"], d["metadata"]["name"]) for d in with_annotator]
        assert len(ids) == len(set(ids))


def _pod_spec(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return find(docs, kind, name)["spec"]["template"]["spec"]


def _subcommand(args: list[str]) -> tuple[list[str], str, list[str]]:
    index = next(i for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in
                                                                             ("--log-format", "--log-level")))
    return args[:index], args[index], args[index + 1:]


@dataclasses.dataclass(frozen=True)
class Workload:
    """What one workload of deploy/ must look like."""

    kind: str
    name: str
    command: str
    replicas: int | None
    port: int
    scheme: str
    options: dict[str, str]


WORKLOADS = [
    Workload("Deployment", CONTROLLER, "controller", 2, 8080, "HTTP",
             {"--cloud-config": "/etc/kubernetes/azure.json", "--leader-election-namespace": NAMESPACE,
              "--metrics-port": "8080"}),
    Workload("DaemonSet", NODE_AGENT, "node-agent", None, 8080, "HTTP", {"--metrics-port": "8080"}),
    Workload("Deployment", WEBHOOK, "webhook", 2, 8443, "HTTPS",
             {"--cloud-config": "/etc/kubernetes/azure.json", "--tls-cert-file": "/tls/tls.crt",
              "--tls-key-file": "/tls/tls.key", "--port": "8443"}),
]


PROVISIONER_WORKLOAD = Workload("Deployment", PROVISIONER, "provisioner", 2, 8080, "HTTP", {
    "--cloud-config": "/etc/kubernetes/azure.json", "--leader-election-namespace": NAMESPACE,
    "--provisioner-name": "cloudzones.io/azure-disk", "--metrics-port": "8080"})


class TestWorkloads:
    """The controller Deployment, node-agent DaemonSet, webhook Deployment and provisioner Deployment."""

    @pytest.mark.parametrize("want", [*WORKLOADS, PROVISIONER_WORKLOAD], ids=[w.name for w in WORKLOADS]
                             + [PROVISIONER])
    def test_workload(self, with_provisioner: list[dict[str, Any]], want: Workload) -> None:
        """Args, replicas, service account, probes on /healthz and /readyz, non-root, resources, selector."""
        workload = find(with_provisioner, want.kind, want.name)
        assert workload["spec"].get("replicas") == want.replicas
        assert workload["spec"]["selector"]["matchLabels"].items() <= \
            workload["spec"]["template"]["metadata"]["labels"].items()
        pod = workload["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == want.name
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        (container,) = pod["containers"]
        _, subcommand, rest = _subcommand(container["args"])
        assert subcommand == want.command
        assert {k: v for k, v in itertools.pairwise(rest) if k in want.options} == want.options
        assert container["image"] == "cloudzones:0.1.0"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = container[probe]["httpGet"]
            assert (get["path"], ports[get["port"]], get.get("scheme", "HTTP")) == (path, want.port, want.scheme)
        security = container["securityContext"]
        assert (security["allowPrivilegeEscalation"], security["readOnlyRootFilesystem"],
                security["capabilities"]["drop"]) == (False, True, ["ALL"])
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}
        assert "memory" in container["resources"]["limits"]

    @pytest.mark.parametrize("name", [CONTROLLER, WEBHOOK, PROVISIONER])
    def test_cloud_config(self, with_provisioner: list[dict[str, Any]], name: str) -> None:
        """The Secret azure-cloud-config is mounted so that its azure.json is /etc/kubernetes/azure.json."""
        pod = _pod_spec(with_provisioner, "Deployment", name)
        volume = next(v for v in pod["volumes"] if (v.get("secret") or {}).get("secretName") == "azure-cloud-config")
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
        assert mount["readOnly"] is True
        assert volume["secret"]["items"] == [{"key": "azure.json", "path": "azure.json"}]
        assert f"{mount['mountPath']}/azure.json" == "/etc/kubernetes/azure.json"

    def test_node_name(self, base: list[dict[str, Any]]) -> None:
        """The node agent learns its node from NODE_NAME = spec.nodeName and runs on tainted nodes too."""
        pod = _pod_spec(base, "DaemonSet", NODE_AGENT)
        assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in \
            pod["containers"][0]["env"]
        assert {"operator": "Exists"} in pod["tolerations"]

    def test_annotator_flag(self, base: list[dict[str, Any]], with_annotator: list[dict[str, Any]]) -> None:
        """Only the annotator variant passes --annotate-pods, and only to the controller."""
        def flags(docs: list[dict[str, Any]]) -> list[str]:
            return [a for d in docs for c in containers(d) for a in c.get("args") or [] if "annotate-pods" in a]
        assert flags(base) == []
        assert flags(with_annotator) == ["--annotate-pods=cloudzones.io/zone-injection=enabled"]
        assert flags([find(with_annotator, "Deployment", CONTROLLER)]) == flags(with_annotator)

    def test_args_parse(self, with_annotator: list[dict[str, Any]], with_provisioner: list[dict[str, Any]]) -> None:
        """Global options are the CLI's; a subcommand the CLI already has parses its args."""
        parser = cli.build_parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        options = {o: a for a in parser._actions for o in a.option_strings if a.choices}
        for doc in with_annotator + with_provisioner:
            for container in containers(doc):
                before, command, _ = _subcommand(container["args"])
                for option, value in zip(before[::2], before[1::2], strict=True):
                    assert value in options[option].choices, (option, value)
                if command in commands:
                    parser.parse_args(container["args"])


class TestWebhook:
    """Service, MutatingWebhookConfiguration and cert-manager objects fit together."""

    def test_configuration(self, base: list[dict[str, Any]]) -> None:
        """CREATE of persistentvolumes to /mutate-pv, v1 reviews, Ignore, no side effects, 5 s."""
        (hook,) = find(base, "MutatingWebhookConfiguration", "cloudzones-pv-labels")["webhooks"]
        assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                  "resources": ["persistentvolumes"], "scope": "Cluster"}]
        assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"], hook["admissionReviewVersions"]
                ) == ("Ignore", "None", 5, ["v1"])
        service = find(base, "Service", WEBHOOK)
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["path"]) == (WEBHOOK, NAMESPACE, "/mutate-pv")
        (port,) = service["spec"]["ports"]
        assert port["port"] == ref["port"]
        pod = _pod_spec(base, "Deployment", WEBHOOK)
        assert service["spec"]["selector"].items() <= \
            find(base, "Deployment", WEBHOOK)["spec"]["template"]["metadata"]["labels"].items()
        assert port["targetPort"] in {p["name"] for p in pod["containers"][0]["ports"]}

    def test_certificate(self, base: list[dict[str, Any]]) -> None:
        """cert-manager issues the serving cert for the Service's DNS name into the mounted Secret; CA injected."""
        configuration = find(base, "MutatingWebhookConfiguration", "cloudzones-pv-labels")
        namespace, name = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
        certificate = find(base, "Certificate", name)
        assert namespace == certificate["metadata"]["namespace"] == NAMESPACE
        assert f"{WEBHOOK}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
        issuer = find(base, certificate["spec"]["issuerRef"]["kind"], certificate["spec"]["issuerRef"]["name"])
        assert issuer["spec"] == {"selfSigned": {}}
        pod = _pod_spec(base, "Deployment", WEBHOOK)
        tls = next(v for v in pod["volumes"] if (v.get("secret") or {}).get("secretName") ==
                   certificate["spec"]["secretName"])
        assert {"name": tls["name"], "mountPath": "/tls", "readOnly": True} in pod["containers"][0]["volumeMounts"]


class TestExample:
    """deploy/examples/zone-injection.yaml uses what the annotator writes."""

    def test_zone_injection(self, with_annotator: list[dict[str, Any]]) -> None:
        """Selected by the annotator's selector; env and the waited-for file read the annotations it writes."""
        (flag,) = [a for c in containers(find(with_annotator, "Deployment", CONTROLLER)) for a in c["args"]
                   if a.startswith("--annotate-pods=")]
        key, value = flag.split("=", 1)[1].split("=")
        (example,) = load(DEPLOY / "examples" / "zone-injection.yaml")
        template = example["spec"]["template"]
        assert template["metadata"]["labels"][key] == value
        field = "metadata.annotations['{}']".format
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in template["spec"]["containers"][0]["env"]}
        assert env == {"ZONE": field(labels.ZONE), "REGION": field(labels.REGION), "ZONES": field(labels.POD_ZONES)}
        (init,) = template["spec"]["initContainers"]
        (volume,) = template["spec"]["volumes"]
        (item,) = volume["downwardAPI"]["items"]
        assert item["fieldRef"]["fieldPath"] == field(labels.ZONE)
        (mount,) = init["volumeMounts"]
        assert mount["name"] == volume["name"]
        assert f"until [ -s {mount['mountPath']}/{item['path']} ]" in init["command"][-1]


class TestStorageClassExample:
    """deploy/examples/storageclass-zoned.yaml: classes our provisioner serves and its rules accept."""

    def test_classes_pass_the_rules(self) -> None:
        """Each class names cloudzones.io/azure-disk and passes StorageClassSpec.from_manifest."""
        from storageclass import StorageClassSpec

        classes = load(DEPLOY / "examples" / "storageclass-zoned.yaml")
        assert len(classes) >= 2
        for doc in classes:
            assert doc["provisioner"] == PROVISIONER_WORKLOAD.options["--provisioner-name"]
            StorageClassSpec.from_manifest(doc, region="eastus")
