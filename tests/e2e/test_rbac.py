"""charts/mydatabase-operator installed for real with `helm install`, and the exact rights it grants.

Each install runs in a namespace that enforces the restricted Pod Security
Standard, so a Ready operator pod proves the API server admitted its security
context. The rights are read back with `kubectl auth can-i --list` as the
operator's ServiceAccount, minus what a fresh ServiceAccount with no bindings
already gets (discovery, self-reviews), and compared with the exact expected set.

The namespaced install also runs the operator process under its ServiceAccount
token against a database in a watched namespace, so the per-namespace Roles
are proven sufficient, not only present.

kwok marks the Deployment's pod Running and Ready; the image never runs, so
`image.repository` can be anything.

They change the CRD's managers, upgrade the CRD and grant cluster-wide rights, which
no other test's operator may see: the module has a control plane of its own (kwok
nodes only, private_cluster.py) and runs on one worker of the parallel pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from .conftest import OperatorProcess
from .private_cluster import private_cluster
from .waiting import get_json, wait_for

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mydatabase-operator"
CRD_SOURCE = REPO / "crds" / "mydatabases.myapp.example.com.yaml"
CRD = "mydatabases.myapp.example.com"
SUFFIX = uuid.uuid4().hex[:5]
pytestmark = [pytest.mark.e2e]
PORT_BASE = 17700  # the module's control plane: ports the suite gives no other cluster

ALL = {"get", "list", "watch", "create", "update", "patch", "delete"}
# What the operator may do in a namespace it manages, as `kubectl auth can-i --list` names it.
NAMESPACED_RIGHTS = {
    "mydatabases.myapp.example.com": {"get", "list", "watch", "patch", "update"},
    "mydatabases.myapp.example.com/status": {"get", "patch", "update"},
    "events": {"create", "patch"},
    "events.events.k8s.io": {"create", "patch"},
    "services": ALL,
    "configmaps": ALL | {"deletecollection"},
    "persistentvolumeclaims": ALL,
    "statefulsets.apps": ALL,
    "cronjobs.batch": ALL,
    "poddisruptionbudgets.policy": ALL,
    "networkpolicies.networking.k8s.io": ALL,
    "jobs.batch": {"get", "list", "watch", "create"},
    "pods": {"get", "list", "watch", "patch", "delete"},
    "endpointslices.discovery.k8s.io": {"list", "watch"},
    "secrets": {"get", "create", "update", "delete"},
    # The primary lease: the operator keeps it, and gives each database's pods the rights to read and renew it.
    "leases.coordination.k8s.io": {"get", "create", "update", "patch", "delete"},
    "serviceaccounts": ALL,
    "roles.rbac.authorization.k8s.io": ALL,
    "rolebindings.rbac.authorization.k8s.io": ALL,
}
# Cluster-scoped, whatever the mode: kopf reads the CRD it serves; StorageClasses
# say whether data claims can grow; with leaderElection.enabled (both installs here),
# the other operators' Leases are listed to refuse an overlapping second instance.
CLUSTER_RIGHTS = {
    "customresourcedefinitions.apiextensions.k8s.io": {"get", "list", "watch"},
    "storageclasses.storage.k8s.io": {"get", "list"},
    "nodes": {"get"},
    "nodes/stats": {"get"},
    "leases.coordination.k8s.io": {"list"},
}
# In the release namespace, with leaderElection.enabled: its own Lease, and the cluster-wide list.
LEASE_RIGHTS = {"leases.coordination.k8s.io": {"get", "list", "create", "update"}}


def rights(*parts: dict[str, set[str]]) -> dict[str, set[str]]:
    """The union of PARTS, verb sets of the same resource merged (as `can-i --list` shows them)."""
    merged: dict[str, set[str]] = {}
    for part in parts:
        for resource, verbs in part.items():
            merged[resource] = merged.get(resource, set()) | verbs
    return merged


@dataclass(frozen=True)
class Install:
    release: str
    namespace: str
    watch: tuple[str, ...] = ()

    @property
    def user(self) -> str:
        # The release's full name is its ServiceAccount's name (serviceAccount.name unset).
        return f"system:serviceaccount:{self.namespace}:{self.release}"


@pytest.fixture(scope="module")
def cluster(cluster):
    """The shared cluster's place taken, for every fixture and test here, by the module's own control plane."""
    with private_cluster(cluster, "rbac", port_base=PORT_BASE) as own:
        yield own.cluster


def cluster_env(cluster) -> dict[str, str]:
    """What hack/cluster.py needs to find the module's control plane."""
    return {**os.environ, "MYDB_CLUSTER_DIR": str(cluster.kubeconfig.parent), "MYDB_CLUSTER_PORT_BASE": str(PORT_BASE),
            "MYDB_REAL_NODE": "0"}


@pytest.fixture(scope="module")
def helm(cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("helm-home")
    env = {"PATH": f"{cluster.bin_dir}:/usr/bin:/bin", "KUBECONFIG": str(cluster.kubeconfig), "HOME": str(home),
           "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_DATA_HOME": str(home / "data")}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([cluster.tool("helm"), *args], capture_output=True, text=True, env=env, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
        return result

    return run


def create_namespace(cluster, name: str, restricted: bool = False) -> None:
    cluster.kubectl("create", "namespace", name)
    labels = ["mydb.test/e2e=true"]
    if restricted:
        labels += ["pod-security.kubernetes.io/enforce=restricted",
                   "pod-security.kubernetes.io/enforce-version=latest"]
    cluster.kubectl("label", "namespace", name, *labels)


def assert_installed_and_ready(cluster, helm, install: Install) -> None:
    """The release is deployed, every object of its manifest exists, the pod is Ready
    in a namespace whose Pod Security admission refuses non-restricted pods."""
    status = json.loads(helm("status", install.release, "-n", install.namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed", status["info"]
    manifest = helm("get", "manifest", install.release, "-n", install.namespace).stdout
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(manifest) if d)
    cluster.kubectl("get", "-f", "-", stdin=manifest)  # fails if any object is missing
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service"} <= set(kinds), kinds

    # Pod Security admission is really enforcing here: a bare pod is refused.
    refused = cluster.kubectl("run", "not-restricted", "--image=example.invalid/x", "-n", install.namespace,
                              "--dry-run=server", check=False)
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr, refused.stderr
    cluster.kubectl("rollout", "status", f"deployment/{install.release}", "-n", install.namespace, "--timeout=120s")
    pods = get_json(cluster, "-n", install.namespace, "pods",
                    "-l", f"app.kubernetes.io/name=mydatabase-operator,app.kubernetes.io/instance={install.release}")
    assert len(pods["items"]) == 1
    [pod] = pods["items"]
    ready = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
    assert ready.get("Ready") == "True", pod["status"]
    assert pod["spec"]["serviceAccountName"] == install.release


def can_i_list(cluster, user: str, namespace: str) -> dict[str, set[str]]:
    """`kubectl auth can-i --list` as `user` in `namespace`: resource (or non-resource
    URL, prefixed url:) -> verbs. Rows are cut at the header's column offsets."""
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    header, *rows = out.splitlines()
    names = ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"]
    starts = [header.index(name) for name in names]
    rights: dict[str, set[str]] = {}
    for row in rows:
        resource, url, resource_names, verbs = (row[a:b].strip() for a, b in zip(starts, starts[1:] + [None]))
        assert resource_names == "[]", f"a right limited to named objects: {row}"
        key = resource if resource else f"url:{url}"
        rights.setdefault(key, set()).update(verbs.strip("[]").split())
    return rights


@pytest.fixture(scope="module")
def no_rights_user(cluster):
    """A ServiceAccount bound to nothing, per namespace: what every ServiceAccount there gets."""
    made: set[str] = set()

    def user(namespace: str) -> str:
        if namespace not in made:
            cluster.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
            made.add(namespace)
        return f"system:serviceaccount:{namespace}:nobody"

    return user


def granted(cluster, install: Install, namespace: str, no_rights_user) -> dict[str, set[str]]:
    """The rights the operator's ServiceAccount has in `namespace` beyond the defaults."""
    mine = can_i_list(cluster, install.user, namespace)
    base = can_i_list(cluster, no_rights_user(install.namespace), namespace)
    extra = {key: verbs - base.get(key, set()) for key, verbs in mine.items()}
    return {key: verbs for key, verbs in extra.items() if verbs}


def can_i(cluster, user: str, verb: str, resource: str, *where: str) -> bool:
    result = cluster.kubectl("auth", "can-i", verb, resource, f"--as={user}", *where, check=False)
    assert result.stdout.strip() in ("yes", "no"), result.stdout + result.stderr
    return result.stdout.strip() == "yes"


def make_helm_the_only_crd_manager(cluster) -> None:
    """Leave the CRD's fields to Helm alone, as in a cluster where only this chart manages it.

    hack/install-dev.sh (and cluster_wide, as it does) applies crds/ too (kubectl,
    server-side), which makes kubectl a co-owner of every field, and a later
    `helm upgrade` that changes one of them a conflict (see docs/install.md).
    """
    crd = get_json(cluster, "crd", CRD, "--show-managed-fields")
    kept = [entry for entry in crd["metadata"]["managedFields"]
            if entry["manager"] == "helm" or entry.get("subresource") == "status"]
    assert any(entry["manager"] == "helm" for entry in kept), crd["metadata"]["managedFields"]
    patch = [{"op": "replace", "path": "/metadata/managedFields", "value": kept}]
    cluster.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(patch))


@pytest.fixture(scope="module")
def cluster_wide(cluster, helm):
    """The CRD applied from crds/ first, as hack/install-dev.sh does on the shared cluster: the chart adopts it."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_SOURCE.parent))
    install = Install(release=f"rbac-cw-{SUFFIX}", namespace=f"rbac-cw-{SUFFIX}")
    create_namespace(cluster, install.namespace, restricted=True)
    # The CRD exists (applied above, or kept by an earlier release): --take-ownership
    # adopts it, --force-conflicts takes the fields another manager set to other values.
    helm("install", install.release, str(CHART), "-n", install.namespace, "--take-ownership", "--force-conflicts",
         "--set", "image.repository=example.invalid/mydatabase-operator", "--set", "leaderElection.enabled=true",
         "--wait", "--timeout=120s")
    make_helm_the_only_crd_manager(cluster)
    yield install
    if helm("status", install.release, "-n", install.namespace, check=False).returncode == 0:
        helm("uninstall", install.release, "-n", install.namespace, "--wait", "--timeout=60s", check=False)
    cluster.kubectl("delete", "namespace", install.namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def namespaced(cluster, helm, cluster_wide):
    """watchNamespaces [a, b]; c is managed by nobody. The CRD comes from the
    cluster-wide release (crds.install=false: one release owns it)."""
    a, b, c = (f"rbac-{x}-{SUFFIX}" for x in "abc")
    install = Install(release=f"rbac-ns-{SUFFIX}", namespace=f"rbac-ns-{SUFFIX}", watch=(a, b))
    create_namespace(cluster, install.namespace, restricted=True)
    for name in (a, b, c):
        create_namespace(cluster, name)
    helm("install", install.release, str(CHART), "-n", install.namespace,
         "--set", f"watchNamespaces={{{a},{b}}}", "--set", "crds.install=false",
         "--set", "image.repository=example.invalid/mydatabase-operator", "--wait", "--timeout=120s")
    yield install, c
    helm("uninstall", install.release, "-n", install.namespace, "--wait", "--timeout=60s", check=False)
    for name in (install.namespace, a, b, c):
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


# ---------------------------------------------------------------- cluster-wide

def test_cluster_wide_install_is_accepted_and_ready(cluster, helm, cluster_wide):
    """helm install (no watchNamespaces): every object accepted, the pod Ready under
    restricted Pod Security, the CRD Established and marked resource-policy keep."""
    assert_installed_and_ready(cluster, helm, cluster_wide)
    crd = get_json(cluster, "crd", CRD)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == cluster_wide.release
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    service = get_json(cluster, "-n", cluster_wide.namespace, "service", f"{cluster_wide.release}-metrics")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("metrics", 9090)]


def test_cluster_wide_rights_are_exactly_the_expected_set(cluster, cluster_wide, no_rights_user):
    """In any namespace the ServiceAccount has exactly the operator's rights beyond
    the defaults (no more, no less, no non-resource URL); in its own namespace
    also the Lease rights of leader election."""
    assert granted(cluster, cluster_wide, "default", no_rights_user) == rights(CLUSTER_RIGHTS, NAMESPACED_RIGHTS)
    assert granted(cluster, cluster_wide, cluster_wide.namespace, no_rights_user) == rights(
        CLUSTER_RIGHTS, NAMESPACED_RIGHTS, LEASE_RIGHTS)
    user = cluster_wide.user
    assert can_i(cluster, user, "list", "mydatabases.myapp.example.com", "--all-namespaces")
    assert not can_i(cluster, user, "list", "secrets", "--all-namespaces")
    assert not can_i(cluster, user, "watch", "secrets", "-n", "default")
    assert not can_i(cluster, user, "list", "namespaces")


# ---------------------------------------------------------------- namespaced

def test_namespaced_install_is_accepted_and_ready(cluster, helm, namespaced):
    """watchNamespaces [a, b]: a Role and RoleBinding in a and b, the Lease Role in its own namespace,
    none in c; the pod is Ready."""
    install, other = namespaced
    assert_installed_and_ready(cluster, helm, install)
    for namespace in (*install.watch, other, install.namespace):
        roles = get_json(cluster, "-n", namespace, "roles", "-l", f"app.kubernetes.io/instance={install.release}")
        bindings = get_json(cluster, "-n", namespace, "rolebindings",
                            "-l", f"app.kubernetes.io/instance={install.release}")
        expected = 0 if namespace == other else 1
        assert len(roles["items"]) == len(bindings["items"]) == expected, namespace


def test_namespaced_rights_only_in_watched_namespaces(cluster, namespaced, no_rights_user):
    """The namespaced ServiceAccount manages MyDatabases (and their objects) in a and b;
    in c it has nothing but the cluster-scope reads, in its own namespace those and its Lease."""
    install, other = namespaced
    for namespace in install.watch:
        assert granted(cluster, install, namespace, no_rights_user) == rights(CLUSTER_RIGHTS, NAMESPACED_RIGHTS), \
            namespace
    assert granted(cluster, install, other, no_rights_user) == CLUSTER_RIGHTS
    assert granted(cluster, install, install.namespace, no_rights_user) == rights(CLUSTER_RIGHTS, LEASE_RIGHTS)
    user = install.user
    for verb in ("get", "list", "watch", "patch", "update"):
        for namespace in install.watch:
            assert can_i(cluster, user, verb, "mydatabases.myapp.example.com", "-n", namespace), (verb, namespace)
        assert not can_i(cluster, user, verb, "mydatabases.myapp.example.com", "-n", other), verb
    assert not can_i(cluster, user, "list", "mydatabases.myapp.example.com", "--all-namespaces")
    assert not can_i(cluster, user, "create", "statefulsets.apps", "-n", other)
    assert not can_i(cluster, user, "create", "secrets", "-n", other)


def test_namespaced_operator_runs_under_its_roles(cluster, namespaced, tmp_path):
    """The operator process, with the namespaced ServiceAccount's token and -n a -n b,
    brings a MyDatabase in a to Ready and deletes it; it is never refused anything
    (it does not scan namespaces when given -n; its Lease is in the release namespace,
    and the cluster-wide list of Leases is granted), and never touches c."""
    install, other = namespaced
    watched = install.watch[0]
    kubeconfig = tmp_path / "operator.kubeconfig"
    subprocess.run([sys.executable, str(REPO / "hack" / "cluster.py"), "sa-kubeconfig", "-n", install.namespace,
                    "-s", install.release, "-o", str(kubeconfig)], check=True, capture_output=True,
                   env=cluster_env(cluster))
    operator = OperatorProcess(cluster=cluster, kubeconfig=kubeconfig, log_path=tmp_path / "operator.log",
                               lease_namespace=install.namespace, lease_name=install.release,
                               args=[arg for namespace in install.watch for arg in ("-n", namespace)])
    operator.start()
    try:
        body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": "scoped"},
                "spec": {"replicas": 1, "version": "15.2", "storage": "1Gi", "deletionPolicy": "Delete"}}
        cluster.kubectl("apply", "-n", watched, "-f", "-", stdin=json.dumps(body))
        result = cluster.kubectl("wait", "-n", watched, "--for=condition=Ready", "mydb/scoped", "--timeout=120s",
                                 check=False)
        assert result.returncode == 0, result.stderr + operator.log_since_start()
        wait_for("this operator's reconcile of the database", lambda: f"{watched}/scoped" in operator.log_since_start())
        cluster.kubectl("delete", "-n", watched, "mydb/scoped", "--timeout=90s")
        wait_for("the release uninstalled", lambda: not get_json(cluster, "-n", watched, "statefulset", "scoped"))
    finally:
        operator.stop()
    text = operator.log_since_start()
    assert "Traceback" not in text, text
    refused = [line for line in text.splitlines() if re.search(r"forbidden", line, re.I)]
    assert not refused, "\n".join(refused)
    assert f"{other}/" not in text


# ---------------------------------------------------------------- CRD upgrade and uninstall

def live_description(cluster) -> str:
    return get_json(cluster, "crd", CRD)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"]


def test_helm_upgrade_upgrades_the_crd(cluster, helm, cluster_wide, tmp_path):
    """A changed CRD in the chart reaches the live CRD on `helm upgrade` (a crds/
    folder never would); upgrading back restores the crds/ text."""
    chart = tmp_path / "mydatabase-operator"
    shutil.copytree(CHART, chart)
    copy_path = chart / "files" / CRD_SOURCE.name
    crd = yaml.safe_load(copy_path.read_text())
    original = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"]
    marker = f"Upgraded by helm ({SUFFIX})."
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = marker
    copy_path.write_text(yaml.safe_dump(crd, sort_keys=False))
    assert live_description(cluster) == original
    try:
        helm("upgrade", cluster_wide.release, str(chart), "-n", cluster_wide.namespace, "--reuse-values",
             "--wait", "--timeout=120s")
        assert live_description(cluster) == marker
    finally:
        helm("upgrade", cluster_wide.release, str(CHART), "-n", cluster_wide.namespace, "--reuse-values",
             "--wait", "--timeout=120s")
    assert live_description(cluster) == original
    history = json.loads(helm("history", cluster_wide.release, "-n", cluster_wide.namespace, "-o", "json").stdout)
    assert [h["status"] for h in history][-1] == "deployed" and len(history) == 3


def test_uninstall_keeps_the_crd_and_the_databases(cluster, helm, cluster_wide, namespaced):
    """helm uninstall removes the operator's Deployment, ServiceAccount and RBAC but
    keeps the CRD (resource-policy keep), so existing MyDatabases stay."""
    _, other = namespaced
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": "survivor"},
            "spec": {"replicas": 1, "version": "15.2", "storage": "1Gi"}}
    cluster.kubectl("apply", "-n", other, "-f", "-", stdin=json.dumps(body))
    uid = get_json(cluster, "-n", other, "mydb", "survivor")["metadata"]["uid"]
    result = helm("uninstall", cluster_wide.release, "-n", cluster_wide.namespace, "--wait", "--timeout=60s")
    assert "CustomResourceDefinition" in result.stdout + result.stderr  # "kept due to the resource policy"
    for kind in ("deployment", "serviceaccount", "service"):
        assert not get_json(cluster, "-n", cluster_wide.namespace, kind, cluster_wide.release
                            if kind != "service" else f"{cluster_wide.release}-metrics"), kind
    for kind in ("clusterrole", "clusterrolebinding"):
        assert not get_json(cluster, kind, cluster_wide.release), kind
    crd = get_json(cluster, "crd", CRD)
    assert crd and not crd["metadata"].get("deletionTimestamp")
    assert get_json(cluster, "-n", other, "mydb", "survivor")["metadata"]["uid"] == uid
