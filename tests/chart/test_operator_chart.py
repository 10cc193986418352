"""Tests of charts/mydatabase-operator rendered by the real helm CLI (no cluster needed).

They pin the operator's rights (the exact rule set, no wildcards, Secrets only
created and deleted), the restricted pod security of its Deployment, the CRD
template that must equal crds/ (its single source), metrics and the values schema.
tests/e2e/test_rbac.py proves the same rights on a real API server.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from manifests import documents

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mydatabase-operator"
CRD_SOURCE = REPO / "crds" / "mydatabases.myapp.example.com.yaml"
CRD_CHART_COPY = CHART / "files" / CRD_SOURCE.name
CRD_NAME = "mydatabases.myapp.example.com"
RELEASE = "mydb-operator"
NAMESPACE = "mydb-system"
SELECTOR = {"app.kubernetes.io/name": "mydatabase-operator", "app.kubernetes.io/instance": RELEASE}

ALL = {"get", "list", "watch", "create", "update", "patch", "delete"}
# The operator's rights in a namespace it manages: (apiGroup, resource) -> verbs.
NAMESPACED_RIGHTS = {
    ("myapp.example.com", "mydatabases"): {"get", "list", "watch", "patch", "update"},
    ("myapp.example.com", "mydatabases/status"): {"get", "patch", "update"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("", "services"): ALL,
    ("", "configmaps"): ALL | {"deletecollection"},
    ("", "persistentvolumeclaims"): ALL,
    ("apps", "statefulsets"): ALL,
    ("batch", "cronjobs"): ALL,
    ("policy", "poddisruptionbudgets"): ALL,
    ("networking.k8s.io", "networkpolicies"): ALL,
    ("batch", "jobs"): {"get", "list", "watch", "create"},
    ("", "pods"): {"get", "list", "watch", "patch", "delete"},
    ("discovery.k8s.io", "endpointslices"): {"list", "watch"},
    ("", "secrets"): {"get", "create", "update", "delete"},
    # The primary lease: the operator's own (by name), and the ServiceAccount, Role and RoleBinding the chart gives
    # each database's pods to read and renew it (Kubernetes lets it grant only what it holds itself).
    ("coordination.k8s.io", "leases"): {"get", "create", "update", "patch", "delete"},
    ("", "serviceaccounts"): ALL,
    ("rbac.authorization.k8s.io", "roles"): ALL,
    ("rbac.authorization.k8s.io", "rolebindings"): ALL,
}
# Cluster-scoped, in every install: kopf reads the CRD it serves; StorageClasses
# say whether data claims can grow; the nodes' kubelets how full the volumes are.
CLUSTER_RIGHTS = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get", "list", "watch"},
    ("storage.k8s.io", "storageclasses"): {"get", "list"},
    ("", "nodes"): {"get"},
    ("", "nodes/stats"): {"get"},
}
# In the release namespace, with leaderElection.enabled.
LEASE_RIGHTS = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
# Cluster-scoped, with leaderElection.enabled (the default): the other operators' Leases are
# listed to refuse a second instance whose namespaces overlap.
LEASE_LIST_RIGHTS = {("coordination.k8s.io", "leases"): {"list"}}


class Rendered:
    def __init__(self, text: str):
        self.docs = documents(text)
        self.by_key = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in self.docs}
        assert len(self.by_key) == len(self.docs), "duplicate objects in the output"

    def kinds(self, kind: str) -> list[dict]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str) -> dict:
        [found] = self.kinds(kind)
        return found


@pytest.fixture
def render(helm):
    def do(values: dict | None = None, *extra: str, chart: Path = CHART) -> Rendered:
        res = helm("template", RELEASE, str(chart), "--namespace", NAMESPACE, *extra, values=values)
        assert res.returncode == 0, f"helm template failed:\n{res.stderr}"
        return Rendered(res.stdout)
    return do


def rights(role: dict) -> dict[tuple[str, str], set[str]]:
    """A Role's or ClusterRole's rules as (apiGroup, resource) -> verbs, merged over rules."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, f"unexpected rule fields: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def deployment_container(out: Rendered) -> dict:
    [container] = out.one("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


# ---------------------------------------------------------------- RBAC

def test_cluster_wide_by_default(render):
    """No watchNamespaces: one ClusterRole with every right, bound to the chart's
    ServiceAccount; no Roles; the operator gets no --namespace."""
    out = render()
    assert [r["metadata"]["name"] for r in out.kinds("Role")] == [f"{RELEASE}-leader-election"]
    role = out.one("ClusterRole")
    leases = ("coordination.k8s.io", "leases")
    merged = {**CLUSTER_RIGHTS, **NAMESPACED_RIGHTS, leases: NAMESPACED_RIGHTS[leases] | LEASE_LIST_RIGHTS[leases]}
    assert rights(role) == merged
    binding = out.one("ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    sa = out.one("ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]
    pod = out.one("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"] == RELEASE
    assert not any(a.startswith("--namespace") for a in deployment_container(out)["args"])


def test_watch_namespaces_gives_a_role_per_namespace(render):
    """watchNamespaces [a, b]: a Role and RoleBinding in each with the namespaced
    rights; the ClusterRole keeps only the cluster-scope reads; the operator watches a and b."""
    out = render({"watchNamespaces": ["team-a", "team-b"]})
    roles = {r["metadata"]["namespace"]: r for r in out.kinds("Role") if not r["metadata"]["name"].endswith("-election")}
    bindings = {b["metadata"]["namespace"]: b for b in out.kinds("RoleBinding")
                if not b["metadata"]["name"].endswith("-election")}
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    for namespace, role in roles.items():
        assert rights(role) == NAMESPACED_RIGHTS, namespace
        binding = bindings[namespace]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": role["metadata"]["name"]}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    assert rights(out.one("ClusterRole")) == {**CLUSTER_RIGHTS, **LEASE_LIST_RIGHTS}
    args = deployment_container(out)["args"]
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=team-a", "--namespace=team-b"]


@pytest.mark.parametrize("values", [
    {},
    {"watchNamespaces": ["a", "b", "c"]},
    {"metrics": {"enabled": True, "port": 9090, "serviceMonitor": {"enabled": True}}},
    {"deployment": {"enabled": False}, "crds": {"install": False}},
    {"leaderElection": {"enabled": True, "leaseSeconds": 15}, "watchNamespaces": ["a"]},
], ids=["cluster-wide", "namespaced", "service-monitor", "rbac-only", "leader-election"])
def test_least_privilege_everywhere(render, values):
    """In every shape of the chart: no wildcard group, resource or verb; no verb that
    grants power over RBAC or identities (bind, escalate, impersonate, token requests); Nodes only read by name, and their kubelets' stats,
    never their proxy (every kubelet endpoint, exec included); Secrets only got (a user's Secret is checked by name),
    created and deleted, never listed or watched, by exactly one rule."""
    out = render(values)
    roles = out.kinds("Role") + out.kinds("ClusterRole")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"wildcard {field} in {role['metadata']['name']}: {rule}"
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
            if "deletecollection" in rule["verbs"]:  # only Helm's records, by label, when a database goes
                assert rule["resources"] == ["configmaps"] and rule["verbs"] == ["deletecollection"], rule
            assert not {"clusterroles", "clusterrolebindings", "serviceaccounts/token", "namespaces", "nodes/proxy",
                        "pods/exec", "pods/attach", "pods/portforward"} & set(rule["resources"]), rule
            # Roles, their bindings and ServiceAccounts in the databases' namespaces, for the primary lease's
            # rights (never bind or escalate, above: no right the operator does not hold itself).
            if {"roles", "rolebindings", "serviceaccounts"} & set(rule["resources"]):
                assert rule["resources"] in (["serviceaccounts"], ["roles", "rolebindings"]), rule
            if {"nodes", "nodes/stats"} & set(rule["resources"]):  # a Node's address, its kubelet's figures
                assert rule["resources"] == ["nodes", "nodes/stats"] and rule["verbs"] == ["get"], rule
        secret_rules = [r for r in role["rules"] if "secrets" in r["resources"]]
        holds_database_rights = ("myapp.example.com", "mydatabases") in rights(role)
        if not holds_database_rights:
            assert not secret_rules, role["metadata"]
            continue
        assert len(secret_rules) == 1, role["metadata"]
        assert secret_rules[0]["apiGroups"] == [""] and set(secret_rules[0]["verbs"]) == {"get", "create", "update", "delete"}


def test_leader_election_role_and_flags(render):
    """leaderElection.enabled: a Role for Leases in the release namespace only (no
    other rights), a cluster-wide list of Leases for the overlap check, and the
    operator (which elects by default) takes the Lease named after the release there.
    Off: no Lease right at all, and the operator is told --leader-elect=false."""
    off = render({"leaderElection": {"enabled": False}})
    assert not off.kinds("Role")
    # Cluster-wide, the Leases it may touch are the databases' primary leases alone: no list for an overlap check.
    assert rights(off.one("ClusterRole"))[("coordination.k8s.io", "leases")] == {"get", "create", "update", "patch", "delete"}
    assert [a for a in deployment_container(off)["args"] if a.startswith("--leader")] == ["--leader-elect=false"]
    assert off.one("Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    out = render({"leaderElection": {"enabled": True, "leaseSeconds": 20}, "watchNamespaces": ["team-a"]})
    leases = [r for r in out.kinds("Role") if r["metadata"]["name"] == f"{RELEASE}-leader-election"]
    assert len(leases) == 1 and leases[0]["metadata"]["namespace"] == NAMESPACE
    assert rights(leases[0]) == LEASE_RIGHTS
    [binding] = [b for b in out.kinds("RoleBinding") if b["metadata"]["name"] == f"{RELEASE}-leader-election"]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["name"] == f"{RELEASE}-leader-election"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    container = deployment_container(out)
    assert [a for a in container["args"] if a.startswith("--leader")] == [
        f"--leader-lease-name={RELEASE}", f"--leader-lease-namespace={NAMESPACE}", "--leader-lease-seconds=20"]
    cluster_role = rights(out.one("ClusterRole"))
    assert cluster_role[("coordination.k8s.io", "leases")] == {"list"}
    pod_name = next(e for e in container["env"] if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_helm_driver_is_configmap(render):
    """The rights hold no Secret read, so Helm in the operator must store releases in ConfigMaps."""
    env = {e["name"]: e.get("value") for e in deployment_container(render())["env"]}
    assert env["HELM_DRIVER"] == "configmap"


# ---------------------------------------------------------------- Deployment

def test_deployment_restricted_pod_security(render):
    """The restricted Pod Security Standard: non-root numeric user 10001 (the image's),
    RuntimeDefault seccomp, no privilege escalation, all capabilities dropped,
    read-only root with an emptyDir on /tmp."""
    out = render()
    pod = out.one("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsGroup"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = deployment_container(out)
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc.get("privileged", False) is False
    assert sc.get("runAsUser", 10001) == 10001 and sc.get("runAsNonRoot", True) is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert list(mounts) == ["/tmp"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")


def test_deployment_probe_image_and_resources(render):
    """Liveness and readiness probe kopf's /healthz on 8080, the port passed as
    --health-port; the image tag defaults to appVersion; resources come from values."""
    out = render()
    dep = out.one("Deployment")
    assert dep["spec"]["replicas"] == 1
    # Leader election is on by default: a new pod waits as a standby, so the rollout never overlaps leaders.
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert dep["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert SELECTOR.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    container = deployment_container(out)
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"] == f"mydatabase-operator:{app_version}"
    assert container["args"][0] == "run" and "--health-port=8080" in container["args"]
    assert "--resync=60" in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["health"] == 8080
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}, probe
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi"},
                                      "limits": {"memory": "512Mi", "ephemeral-storage": "1Gi"}}


def test_network_policy_admits_only_health_and_metrics(render):
    """The operator's NetworkPolicy selects its pods and admits ingress to the health and metrics ports only;
    without metrics only health; none when disabled or without the Deployment."""
    out = render()
    policy = out.one("NetworkPolicy")["spec"]
    assert policy["podSelector"] == {"matchLabels": SELECTOR}
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"port": "health", "protocol": "TCP"},
                                            {"port": "metrics", "protocol": "TCP"}]}]
    named = {p["name"] for p in deployment_container(out)["ports"]}
    assert {"health", "metrics"} <= named
    no_metrics = render(None, "--set", "metrics.enabled=false").one("NetworkPolicy")["spec"]
    assert no_metrics["ingress"] == [{"ports": [{"port": "health", "protocol": "TCP"}]}]
    assert render(None, "--set", "networkPolicy.enabled=false").kinds("NetworkPolicy") == []
    assert render(None, "--set", "deployment.enabled=false").kinds("NetworkPolicy") == []


def test_deployment_scheduling_and_metadata_values(render):
    """replicas, nodeSelector, tolerations, affinity, pod labels/annotations,
    image, pull secrets and priority class reach the pod template unchanged."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}]}}}
    tolerations = [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]
    out = render({
        "replicas": 0,
        "image": {"repository": "registry.example.com:5000/team/mydb-operator", "tag": "1.2.3",
                  "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": tolerations,
        "affinity": affinity,
        "podAnnotations": {"example.com/note": "hello"},
        "podLabels": {"team": "data"},
        "priorityClassName": "system-cluster-critical",
        "resyncSeconds": 30,
        "helmParallel": 8,
        "rolloutWindow": 0,
        "serviceAccount": {"name": "custom-sa", "annotations": {"example.com/role": "x"}},
    })
    dep = out.one("Deployment")
    assert dep["spec"]["replicas"] == 0
    template = dep["spec"]["template"]
    assert template["metadata"]["annotations"]["example.com/note"] == "hello"
    assert set(template["metadata"]["annotations"]) == {"example.com/note", "checksum/platform"}
    assert template["metadata"]["labels"]["team"] == "data"
    pod = template["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == tolerations
    assert pod["affinity"] == affinity
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == "custom-sa"
    container = deployment_container(out)
    assert container["image"] == "registry.example.com:5000/team/mydb-operator:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert "--resync=30" in container["args"]
    assert "--helm-parallel=8" in container["args"] and "--rollout-window=0" in container["args"]
    sa = out.one("ServiceAccount")
    assert sa["metadata"]["name"] == "custom-sa" and sa["metadata"]["annotations"] == {"example.com/role": "x"}
    assert {s["name"] for s in out.one("ClusterRoleBinding")["subjects"]} == {"custom-sa"}


def test_deployment_disabled_renders_rbac_only(render):
    """deployment.enabled=false (hack/install-dev.sh): ServiceAccount and RBAC, no
    Deployment and no metrics Service that would select nothing."""
    out = render({"deployment": {"enabled": False}})
    assert not out.kinds("Deployment") and not out.kinds("Service")
    assert out.kinds("ServiceAccount") and out.kinds("ClusterRole") and out.kinds("ClusterRoleBinding")


# ---------------------------------------------------------------- metrics

def test_metrics_service_selects_the_operator_pods(render):
    """By default the operator serves metrics on 9090 and a Service named
    <release>-metrics exposes that port, named metrics, selecting the operator pods."""
    out = render()
    container = deployment_container(out)
    assert "--metrics-port=9090" in container["args"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"] == 9090
    service = out.one("Service")
    assert service["metadata"]["name"] == f"{RELEASE}-metrics"
    assert service["spec"]["selector"] == out.one("Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    assert not out.kinds("ServiceMonitor")


def test_metrics_port_and_disabling(render):
    """metrics.port moves the flag, container port and Service together;
    metrics.enabled=false drops all three and tells the operator not to listen (its own default is 9090)."""
    out = render({"metrics": {"enabled": True, "port": 9300, "serviceMonitor": {"enabled": False}}})
    assert "--metrics-port=9300" in deployment_container(out)["args"]
    assert out.one("Service")["spec"]["ports"][0]["port"] == 9300
    out = render({"metrics": {"enabled": False, "port": 9090, "serviceMonitor": {"enabled": False}}})
    container = deployment_container(out)
    assert [a for a in container["args"] if a.startswith("--metrics-port")] == ["--metrics-port=0"]
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert not out.kinds("Service") and not out.kinds("ServiceMonitor")


def test_service_monitor_only_when_enabled(render, helm):
    """serviceMonitor.enabled renders a monitoring.coreos.com/v1 ServiceMonitor that
    scrapes the metrics port of the metrics Service; it needs metrics.enabled."""
    out = render({"metrics": {"enabled": True, "port": 9090, "serviceMonitor": {
        "enabled": True, "interval": "15s", "scrapeTimeout": "5s", "labels": {"release": "prometheus"}}}})
    monitor = out.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s",
                                             "scrapeTimeout": "5s"}]
    service = out.one("Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    res = helm("template", RELEASE, str(CHART), values={
        "metrics": {"enabled": False, "port": 9090, "serviceMonitor": {"enabled": True}}})
    assert res.returncode != 0 and "metrics.serviceMonitor.enabled needs metrics.enabled" in res.stderr, res.stderr


# ---------------------------------------------------------------- CRD

def test_chart_crd_copy_is_the_crds_file():
    """crds/ is the single source: the chart's files/ copy is byte-identical
    (hack/sync-chart-crd.sh copies it; its --check mode agrees)."""
    assert CRD_CHART_COPY.read_bytes() == CRD_SOURCE.read_bytes(), (
        "charts/mydatabase-operator/files/ differs from crds/: run hack/sync-chart-crd.sh (make chart-crd)")
    check = subprocess.run(["bash", str(REPO / "hack" / "sync-chart-crd.sh"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_crd_template_equals_crds_file(render):
    """The rendered CRD is the crds/ CRD: same name and spec, its labels kept, plus
    helm.sh/resource-policy: keep so uninstalling the chart never deletes it."""
    source = yaml.safe_load(CRD_SOURCE.read_text())
    crd = render().one("CustomResourceDefinition")
    assert crd["apiVersion"] == source["apiVersion"]
    assert crd["metadata"]["name"] == source["metadata"]["name"] == CRD_NAME
    assert crd["spec"] == source["spec"]
    assert source["metadata"].get("labels", {}).items() <= crd["metadata"]["labels"].items()
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert set(crd) == {"apiVersion", "kind", "metadata", "spec"}


def test_crd_install_can_be_turned_off(render):
    """crds.install=false: the CRD is left to whoever manages it."""
    assert not render({"crds": {"install": False}}).kinds("CustomResourceDefinition")


def test_crd_template_follows_the_chart_copy(render, tmp_path):
    """The template reads files/, so a changed copy changes the rendered CRD (what
    `helm upgrade` then applies), and a missing copy fails with the fix."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    copy_path = chart / "files" / CRD_SOURCE.name
    crd = yaml.safe_load(copy_path.read_text())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "changed in the chart copy"
    copy_path.write_text(yaml.safe_dump(crd))
    rendered = render(chart=chart).one("CustomResourceDefinition")
    assert rendered["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] == "changed in the chart copy"


def test_missing_crd_copy_fails_clearly(helm, tmp_path):
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / "files" / CRD_SOURCE.name).unlink()
    res = helm("template", RELEASE, str(chart))
    assert res.returncode != 0 and "hack/sync-chart-crd.sh" in res.stderr, res.stderr


# ---------------------------------------------------------------- schema, lint, notes

DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def with_change(path: str, value) -> dict:
    values = copy.deepcopy(DEFAULTS)
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node[key]
    node[last] = value
    return values


@pytest.mark.parametrize("path, value, field", [
    ("unknownKey", 1, "unknownKey"),
    ("replicas", 4, "/replicas"),
    ("replicas", "1", "/replicas"),
    ("leaderElection.leaseSeconds", 1, "/leaderElection/leaseSeconds"),
    ("leaderElection.enabled", "true", "/leaderElection/enabled"),
    ("watchNamespaces", ["Team_A"], "/watchNamespaces/0"),
    ("watchNamespaces", ["a", "a"], "/watchNamespaces"),
    ("watchNamespaces", "a", "/watchNamespaces"),
    ("resyncSeconds", 0, "/resyncSeconds"),
    ("helmParallel", 0, "/helmParallel"),
    ("rolloutWindow", -1, "/rolloutWindow"),
    ("image.pullPolicy", "Sometimes", "/image/pullPolicy"),
    ("image.repository", "Has Spaces", "/image/repository"),
    ("image.extra", "x", "/image"),
    ("crds.install", "yes", "/crds/install"),
    ("crds.upgrade", True, "/crds"),
    ("metrics.port", 80, "/metrics/port"),
    ("metrics.port", 8080, "/metrics/port"),
    ("metrics.port", "9090", "/metrics/port"),
    ("metrics.serviceMonitor.interval", "soon", "/metrics/serviceMonitor/interval"),
    ("resources.requests", {"cpu": "lots"}, "/resources/requests"),
    ("podLabels", {"app.kubernetes.io/instance": "other"}, "/podLabels"),
    ("podAnnotations", {"a": 1}, "/podAnnotations/a"),
    ("tolerations", [{"operator": "Maybe"}], "/tolerations/0/operator"),
    ("serviceAccount.name", "Bad_Name", "/serviceAccount/name"),
], ids=lambda v: str(v) if not isinstance(v, (dict, list)) else None)
def test_schema_rejects_bad_values(helm, path, value, field):
    """values.schema.json rejects unknown keys, wrong types and malformed values,
    and helm's error names the field."""
    res = helm("template", RELEASE, str(CHART), values=with_change(path, value))
    assert res.returncode != 0, res.stdout[:300]
    assert field in res.stderr, res.stderr


def test_lint_strict_passes(helm):
    """helm lint --strict: no warning or error (the missing icon is an INFO), in both modes."""
    for values in (None, {"watchNamespaces": ["a", "b"]},
                   with_change("metrics.serviceMonitor.enabled", True), with_change("leaderElection.enabled", True)):
        res = helm("lint", "--strict", str(CHART), values=values)
        output = res.stdout + res.stderr
        assert res.returncode == 0, output
        messages = [line for line in output.splitlines() if line.startswith("[")]
        assert messages == ["[INFO] Chart.yaml: icon is recommended"], output


def test_notes_say_how_to_check_and_start(helm):
    """NOTES.txt names the rollout check and a first MyDatabase in a managed namespace."""
    res = helm("install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE,
               values={"watchNamespaces": ["team-a"]})
    assert res.returncode == 0, res.stderr
    notes = res.stdout.split("NOTES:", 1)[1]
    assert f"kubectl rollout status deployment/{RELEASE} -n {NAMESPACE}" in notes
    assert "kind: MyDatabase" in notes and "kubectl apply -n team-a" in notes
    assert "kubectl wait mydb/first-db -n team-a --for=condition=Ready" in notes


def test_replicas_above_one_need_leader_election(helm):
    """Two operators must never reconcile at once: without leader election the chart refuses replicas > 1."""
    res = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE,
               values={"replicas": 2, "leaderElection": {"enabled": False}})
    assert res.returncode != 0 and "replicas > 1 needs leaderElection.enabled" in res.stderr


def test_platform_config_is_mounted_and_passed(render):
    """A platform value becomes a ConfigMap, mounted read-only and named by --platform-config (before `run`)."""
    out = render({"platform": {"values": {"image": {"registry": "mirror.example.com"}}}, "logFormat": "json"})
    config = out.one("ConfigMap")
    assert yaml.safe_load(config["data"]["platform.yaml"]) == {"values": {"image": {"registry": "mirror.example.com"}}}
    container = deployment_container(out)
    assert container["args"][:2] == ["--platform-config=/etc/mydb-operator/platform.yaml", "run"]
    assert "--log-format=json" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "platform")
    assert mount == {"name": "platform", "mountPath": "/etc/mydb-operator", "readOnly": True}
    assert not render().kinds("ConfigMap")


def test_the_local_platform_config_is_a_valid_platform_value(render):
    """examples/platform-local-node.yaml as the chart's `platform` value, as make demo passes it (its `majors`
    key was once refused by this chart's schema: "additional properties 'majors' not allowed")."""
    local = yaml.safe_load((CHART.parents[1] / "examples" / "platform-local-node.yaml").read_text())
    out = render({"platform": local})
    assert yaml.safe_load(out.one("ConfigMap")["data"]["platform.yaml"])["majors"] == [15, 17]


def test_every_rendered_argument_is_one_the_operator_accepts(render):
    """The Deployment's args parse with the operator's own command line, every option on.

    Found on the real node: --platform-config after `run` made the operator exit
    at start-up ("unrecognized arguments") in a crash loop."""
    from mydb_operator.cli import build_parser
    from mydb_operator.commands.settings import load

    def settings(args: list[str]):
        return load(build_parser().parse_args(args), {})

    out = render({"platform": {"values": {"image": {"registry": "mirror.example.com"}}},
                  "watchNamespaces": ["team-a", "team-b"], "logFormat": "json",
                  "leaderElection": {"enabled": True}, "metrics": {"enabled": True}})
    config = settings(deployment_container(out)["args"])
    assert config.command == "run" and config.namespaces == ("team-a", "team-b") and config.leader_elect is True
    assert (config.leader_lease_name, config.leader_lease_namespace) == (RELEASE, NAMESPACE)
    assert config.platform_config == Path("/etc/mydb-operator/platform.yaml") and config.log_format == "json"
    assert (config.helm_parallel, config.rollout_window, config.resync_seconds) == (2, 16, 60.0)
    off = render({"leaderElection": {"enabled": False}})
    assert settings(deployment_container(off)["args"]).leader_elect is False


def test_the_operators_settings_come_as_flags_only(render):
    """One way in: every operator setting is a flag; the environment holds no MYDB_* variable, only
    Helm's own HELM_DRIVER and the pod's name (docs/install.md, Settings)."""
    for values in ({}, {"platform": {"values": {"image": {"registry": "mirror.example.com"}}}},
                   {"leaderElection": {"enabled": False}}):
        env = deployment_container(render(values))["env"]
        assert {e["name"] for e in env} <= {"HELM_DRIVER", "POD_NAME"}
