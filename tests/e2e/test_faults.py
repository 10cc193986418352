"""Bad input and faults, end to end: clear errors, no crash loops, nothing lost.

The operator is killed with SIGKILL mid-work, loses its API server, finds Helm
releases stuck pending, meets an upgrade Kubernetes refuses, sees its objects
edited by hand and a StorageClass that does not exist. Each test states what
it proves in its docstring.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from .conftest import OperatorProcess, clean_log, descendants, install_crd_and_rbac, operator_instead, wait_ready
from .private_cluster import PrivateCluster, private_cluster
from .test_lifecycle import condition, patch_spec, status
from .test_operator import apply_db, helm
from .waiting import get_json, wait_for

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "myapp.example.com", "v1", "mydatabases"
HISTORY_MAX = 5
BACKOFF_FIRST = 5  # seconds; the operator doubles it per failed attempt, up to 300 s


# ------------------------------------------------------------------ helpers


def history(cluster, namespace: str, name: str) -> list[dict]:
    return json.loads(helm(cluster, "history", name, "-n", namespace, "-o", "json"))


def releases(cluster, namespace: str) -> dict[str, dict]:
    """Every release in the namespace, whatever its state (Helm 4 has no --all: every state flag)."""
    states = ["--deployed", "--failed", "--pending", "--superseded", "--uninstalling", "--uninstalled"]
    result = subprocess.run([cluster.tool("helm"), f"--kubeconfig={cluster.kubeconfig}", "list", "-n", namespace,
                             *states, "-o", "json"], capture_output=True, text=True,
                            env={**os.environ, "HELM_DRIVER": "configmap"})
    assert result.returncode == 0, f"helm list failed: {result.stderr}"
    return {r["name"]: r for r in json.loads(result.stdout or "[]")}


def release_records(cluster, namespace: str, name: str | None = None) -> list[dict]:
    """Helm's storage (HELM_DRIVER=configmap): one ConfigMap per revision, oldest first."""
    selector = "owner=helm" + (f",name={name}" if name else "")
    items = get_json(cluster, "-n", namespace, "configmaps", "-l", selector)["items"]
    return sorted(items, key=lambda cm: (cm["metadata"]["labels"]["name"], int(cm["metadata"]["labels"]["version"])))


def decode_release(record: dict) -> dict:
    raw = base64.b64decode(record["data"]["release"])
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def encode_release(release: dict) -> str:
    return base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()


def make_stuck(cluster, namespace: str, name: str, state: str) -> int:
    """Rewrite the latest revision as if Helm had died in the middle of it; returns that revision."""
    latest = release_records(cluster, namespace, name)[-1]
    release = decode_release(latest)
    release["info"]["status"] = state
    patch = {"metadata": {"labels": {"status": state}}, "data": {"release": encode_release(release)}}
    cluster.kubectl("patch", "-n", namespace, "configmap", latest["metadata"]["name"], "--type=merge",
                    "-p", json.dumps(patch))
    shown = json.loads(helm(cluster, "status", name, "-n", namespace, "-o", "json"))
    assert shown["info"]["status"] == state, shown["info"]
    return int(latest["metadata"]["labels"]["version"])


def logged(operator, prefix: str, text: str) -> bool:
    """One line of the operator's log, since it started, about this database (its "ns/name: " prefix)
    and saying `text`: a line about another test's database does not count."""
    return any(prefix in line and text in line for line in operator.log_since_start().splitlines())


def sts_replicas(cluster, namespace: str, name: str) -> int | None:
    return (get_json(cluster, "-n", namespace, "statefulset", name).get("spec") or {}).get("replicas")


def cron_schedule(cluster, namespace: str, name: str) -> str | None:
    return (get_json(cluster, "-n", namespace, "cronjob", f"{name}-backup").get("spec") or {}).get("schedule")


def warning_events(cluster, namespace: str, name: str, reason: str) -> list[dict]:
    events = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"involvedObject.kind=MyDatabase,involvedObject.name={name},type=Warning")
    return [e for e in events.get("items", []) if e["reason"] == reason]


def event_count(events: list[dict]) -> int:
    """How many times these Events were posted (an Event may be a series with count > 1)."""
    return sum(max(e.get("count") or 1, (e.get("series") or {}).get("count") or 0) for e in events)


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def labelled(items: list[dict], name: str) -> list[dict]:
    return [i for i in items if (i["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == name]


# ------------------------------------------------------------- 1. SIGKILL chaos

CHAOS_CRS = 30
SCHEDULES = ["0 2 * * *", "30 4 * * 0", "@daily", "15 */6 * * *", "0 1 * * 1-5", "45 23 * * *", "@hourly"]


class Chaos:
    """The CRs of the chaos test and what each should end as; CR writes go through the admin client."""

    def __init__(self, cluster, namespace: str, rng: random.Random):
        self.cluster, self.namespace, self.rng = cluster, namespace, rng
        self.api = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))
        self.core = client.CoreV1Api(self.api.api_client)
        self.wanted: dict[str, dict] = {}  # name -> final spec
        self.deleted: dict[str, dict] = {}  # name -> {"policy", "claims" at deletion, "secret" existed}
        self.operations = 0
        self.seen_uids: dict[str, str] = {}  # "pvc/NAME" or "secret/NAME" -> uid, as first seen

    def remember_data(self) -> None:
        """Note the uid of every claim and credentials Secret: none may be lost or re-created later."""
        for claim in self.core.list_namespaced_persistent_volume_claim(self.namespace).items:
            self.seen_uids.setdefault(f"pvc/{claim.metadata.name}", claim.metadata.uid)
        for secret in self.core.list_namespaced_secret(self.namespace).items:
            if secret.metadata.name.endswith("-credentials"):
                self.seen_uids.setdefault(f"secret/{secret.metadata.name}", secret.metadata.uid)

    def data_lost(self) -> list[str]:
        """Claims and Secrets of live CRs, and of deleted Retain CRs, that vanished or were re-created."""
        now = {f"pvc/{c.metadata.name}": c.metadata.uid
               for c in self.core.list_namespaced_persistent_volume_claim(self.namespace).items}
        now.update({f"secret/{s.metadata.name}": s.metadata.uid
                    for s in self.core.list_namespaced_secret(self.namespace).items})
        kept = set(self.wanted) | {n for n, g in self.deleted.items() if g["policy"] == "Retain"}
        lost = []
        for key, uid in sorted(self.seen_uids.items()):
            owner = re.sub(r"^(pvc/(data-)?|secret/)", "", key)
            owner = re.sub(r"(-\d+|-backups|-credentials)$", "", owner)
            if owner in kept and now.get(key) != uid:
                lost.append(f"{key}: {'re-created' if key in now else 'gone'}")
        return lost

    def initial_specs(self) -> None:
        for index in range(CHAOS_CRS):
            spec = {"replicas": self.rng.randint(1, 3), "version": "15.2", "storage": "1Gi",
                    # alternate so that both policies are always among the deleted
                    "deletionPolicy": "Delete" if index % 2 else "Retain"}
            if self.rng.random() < 0.5:
                spec["backup"] = {"schedule": self.rng.choice(SCHEDULES)}
            self.wanted[f"chaos-{index:02d}"] = spec

    def create_all(self) -> None:
        for name, spec in self.wanted.items():
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MyDatabase",
                    "metadata": {"name": name}, "spec": spec}
            self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
            self.operations += 1

    def update_some(self, count: int) -> list[str]:
        """Scale and/or change (add, remove) the backup schedule of `count` random live CRs."""
        names = self.rng.sample(sorted(self.wanted), min(count, len(self.wanted)))
        for name in names:
            spec, patch = self.wanted[name], {}
            if self.rng.random() < 0.7:
                patch["replicas"] = self.rng.choice([r for r in (1, 2, 3) if r != spec["replicas"]])
            if self.rng.random() < 0.6 or not patch:
                if spec.get("backup") and self.rng.random() < 0.2:
                    patch["backup"] = None
                else:
                    current = (spec.get("backup") or {}).get("schedule")
                    patch["backup"] = {"schedule": self.rng.choice([s for s in SCHEDULES if s != current])}
            self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, {"spec": patch})
            for key, value in patch.items():
                if value is None:
                    spec.pop(key, None)
                else:
                    spec[key] = value
            self.operations += 1
        return names

    def delete_some(self, policy: str, count: int, wait_for_data: float = 0) -> list[str]:
        """Delete `count` CRs of this policy, preferring ones that have data claims (so there is data to keep).

        With wait_for_data, first wait up to that many seconds for enough of them to have claims."""
        candidates = sorted(n for n, s in self.wanted.items() if s["deletionPolicy"] == policy)
        deadline = time.monotonic() + wait_for_data
        while True:
            claims_of: dict[str, list[str]] = {}
            for claim in self.core.list_namespaced_persistent_volume_claim(self.namespace).items:
                owner = (claim.metadata.labels or {}).get("app.kubernetes.io/instance")
                claims_of.setdefault(owner, []).append(claim.metadata.name)
            with_data = [n for n in candidates if claims_of.get(n)]
            if len(with_data) >= count or time.monotonic() >= deadline:
                break
            time.sleep(1)
        pool = with_data if len(with_data) >= count else candidates
        names = self.rng.sample(pool, min(count, len(pool)))
        for name in names:
            claims = sorted(claims_of.get(name, []))
            secret = any(s.metadata.name == f"{name}-credentials" for s in self.core.list_namespaced_secret(
                self.namespace, field_selector=f"metadata.name={name}-credentials").items)
            self.api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
            self.deleted[name] = {"policy": policy, "claims": claims, "secret": secret}
            del self.wanted[name]
            self.operations += 1
        return names

    def problems(self) -> list[str]:
        """What still differs from the wanted end state; empty when everything converged."""
        cluster, ns = self.cluster, self.namespace
        found: list[str] = []
        dbs = {d["metadata"]["name"]: d for d in get_json(cluster, "-n", ns, "mydb")["items"]}
        stss = {s["metadata"]["name"]: s for s in get_json(cluster, "-n", ns, "statefulsets")["items"]}
        crons = {c["metadata"]["name"]: c for c in get_json(cluster, "-n", ns, "cronjobs")["items"]}
        listed = releases(cluster, ns)
        for name in sorted(set(dbs) - set(self.wanted)):
            found.append(f"{name}: still exists after deletion")
        for name, spec in sorted(self.wanted.items()):
            db = dbs.get(name)
            if db is None:
                found.append(f"{name}: the MyDatabase is gone")
                continue
            st = db.get("status") or {}
            if not st.get("ready"):
                found.append(f"{name}: not ready ({st.get('phase')}: {st.get('message')})")
            if st.get("observedGeneration") != db["metadata"]["generation"]:
                found.append(f"{name}: observedGeneration {st.get('observedGeneration')} "
                             f"!= generation {db['metadata']['generation']}")
            replicas = (stss.get(name) or {}).get("spec", {}).get("replicas")
            if replicas != spec["replicas"]:
                found.append(f"{name}: StatefulSet replicas {replicas}, wanted {spec['replicas']}")
            schedule = (crons.get(f"{name}-backup") or {}).get("spec", {}).get("schedule")
            if schedule != (spec.get("backup") or {}).get("schedule"):
                wanted = (spec.get("backup") or {}).get("schedule")
                found.append(f"{name}: CronJob schedule {schedule!r}, wanted {wanted!r}")
            if (listed.get(name) or {}).get("status") != "deployed":
                found.append(f"{name}: release {(listed.get(name) or {}).get('status', 'missing')}")
        for name in sorted(set(listed) - set(self.wanted)):
            found.append(f"{name}: orphaned release ({listed[name]['status']})")
        return found


@pytest.mark.long
def test_sigkill_chaos_converges_and_loses_nothing(cluster, operator, namespace):
    """SIGKILLs of the operator amid creates, scales, schedule edits and deletes lose nothing.

    30 MyDatabases are created, updated and partly deleted while the operator
    is killed at seeded random moments (>= 3 rounds; some CR writes land while
    it is down), each aimed at a Helm run when one starts within 5 s (how many
    Helm runs died with it is printed: a timing, not a claim the checks need). Afterwards every remaining CR is Ready with its last spec
    (StatefulSet replicas, CronJob schedule, observedGeneration), Helm holds
    exactly one deployed release per remaining CR (the latest revision; none
    failed, duplicated or orphaned, so releases a kill left pending were
    recovered), deleted Retain CRs kept their claims and Secret, deleted
    Delete CRs left neither, and no claim or credentials Secret of a live or
    retained database was lost or re-created (same uid throughout)."""
    seed = int(os.environ.get("MYDB_CHAOS_SEED") or random.SystemRandom().randrange(2**31))
    print(f"\nchaos seed {seed} (replay with MYDB_CHAOS_SEED={seed})")
    rng = random.Random(seed)
    chaos = Chaos(cluster, namespace, rng)
    chaos.initial_specs()
    kills, helm_killed, left_pending = 0, 0, set()
    started = time.monotonic()

    def helm_running() -> bool:
        return any(b"helm\x00upgrade" in cmdline(pid) or b"helm\x00uninstall" in cmdline(pid)
                   for pid in descendants(operator.process.pid))

    def crash_and_restart(while_down) -> None:
        """Kill at a seeded random moment, preferably while Helm writes, do `while_down`, start again."""
        nonlocal kills, helm_killed
        time.sleep(rng.uniform(0.5, 4.0))
        deadline = time.monotonic() + 5
        while not helm_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.2, 2.0))  # into Helm's run: rendering, pending record, apply, final record
        helm_killed += sum(1 for pid in descendants(operator.process.pid) if b"/helm\x00" in cmdline(pid))
        operator.crash()
        kills += 1
        left_pending.update(f"{r['metadata']['labels']['name']} {r['metadata']['labels']['status']}"
                            for r in release_records(cluster, namespace)
                            if r["metadata"]["labels"]["status"].startswith("pending"))
        chaos.remember_data()
        while_down()
        time.sleep(rng.uniform(0.0, 2.0))
        operator.start()

    # Round 1: creation, killed while the first releases install; scales land while it is down.
    chaos.create_all()
    crash_and_restart(lambda: chaos.update_some(4))
    # Round 2: updates while running, more while down, and deletions while down.
    chaos.update_some(8)
    crash_and_restart(lambda: (chaos.update_some(3), chaos.delete_some("Retain", 2)))
    # Round 3: deletions (both policies, of databases that have data) and updates while running.
    chaos.delete_some("Delete", 2, wait_for_data=60)
    chaos.update_some(6)
    chaos.delete_some("Retain", 1, wait_for_data=60)
    crash_and_restart(lambda: (chaos.delete_some("Delete", 1), chaos.update_some(3)))
    # Round 4: a burst of updates and a deletion, killed again.
    chaos.update_some(6)
    chaos.delete_some("Delete", 1)
    crash_and_restart(lambda: chaos.update_some(2))
    # Round 5: the last changes, killed once more soon after.
    chaos.update_some(5)
    chaos.delete_some("Retain", 1)
    crash_and_restart(lambda: chaos.update_some(2))
    chaos_seconds = time.monotonic() - started

    restarted = time.monotonic()
    deadline, last = restarted + 170, None
    while time.monotonic() < deadline:
        last = chaos.problems()
        if not last:
            break
        time.sleep(2)
    converged = time.monotonic() - restarted
    assert not last, f"seed {seed}: not converged after {converged:.0f}s:\n" + "\n".join(last)
    assert operator.process.poll() is None, "the operator died after the chaos"

    # Helm's storage itself: exactly one deployed revision per release, none pending, none orphaned.
    records = release_records(cluster, namespace)
    by_release: dict[str, list[str]] = {}
    for record in records:
        labels = record["metadata"]["labels"]
        by_release.setdefault(labels["name"], []).append(labels["status"])
    assert set(by_release) == set(chaos.wanted), f"release records for {sorted(set(by_release) ^ set(chaos.wanted))}"
    for name, states in by_release.items():
        # Exactly one deployed revision, and it is the latest: a revision left pending by a kill may stay
        # in the history (Helm never rewrites old records), but nothing after it is pending.
        assert states.count("deployed") == 1 and states[-1] == "deployed", (name, states)
        assert len(states) <= HISTORY_MAX, (name, states)

    # What the deleted ones left behind, per deletionPolicy.
    def leftovers():
        claims = get_json(cluster, "-n", namespace, "pvc")["items"]
        secrets = {s["metadata"]["name"] for s in get_json(cluster, "-n", namespace, "secrets")["items"]}
        wrong = []
        for name, gone in chaos.deleted.items():
            have = sorted(c["metadata"]["name"] for c in labelled(claims, name))
            if gone["policy"] == "Retain":
                if not set(gone["claims"]) <= set(have):
                    wrong.append(f"{name} (Retain): claims {gone['claims']} at deletion, now {have}")
                if gone["secret"] and f"{name}-credentials" not in secrets:
                    wrong.append(f"{name} (Retain): Secret deleted")
            else:
                if have:
                    wrong.append(f"{name} (Delete): claims left {have}")
                if f"{name}-credentials" in secrets:
                    wrong.append(f"{name} (Delete): Secret left")
        return wrong
    deadline, wrong = time.monotonic() + 60, leftovers()
    while wrong and time.monotonic() < deadline:
        time.sleep(0.5)
        wrong = leftovers()
    assert not wrong, f"seed {seed}: deleted CRs did not leave exactly what their policy says:\n" + "\n".join(wrong)
    chaos.remember_data()
    assert not chaos.data_lost(), chaos.data_lost()
    retained = [n for n, g in chaos.deleted.items() if g["policy"] == "Retain" and g["claims"]]
    removed = [n for n, g in chaos.deleted.items() if g["policy"] == "Delete" and g["claims"]]
    assert retained and removed, f"seed {seed}: no data to keep or remove, the checks proved nothing: {chaos.deleted}"
    assert kills >= 3
    recovered = operator.log_path.read_text(errors="replace").count("was left half-done")
    print(f"chaos summary: seed {seed}, {CHAOS_CRS} CRs, {chaos.operations} CR operations, {kills} SIGKILLs "
          f"({helm_killed} Helm runs killed with it; releases left pending: {sorted(left_pending) or 'none'}; "
          f"pending recoveries logged: {recovered}), {len(chaos.deleted)} deleted ({len(retained)} Retain kept "
          f"their claims, {len(removed)} Delete removed theirs), {len(chaos.wanted)} remaining, "
          f"{len(chaos.seen_uids)} claims and Secrets unchanged; chaos phase {chaos_seconds:.0f}s, "
          f"converged {converged:.0f}s after the last restart")


# ------------------------------------------------------- 2. API server restart



@pytest.mark.long
def test_api_server_restart_needs_no_operator_restart(cluster):
    """After the API server restarts, spec changes converge promptly, quietly, with the same operator process.

    Eight databases created 1.2 s apart spread their 10 s resyncs over the
    period, so some reconcile runs while the API server is down. Afterwards a
    scale of each converges within 30 s, the operator's pid is unchanged, and
    its log has no traceback. The API server restarted is that of a cluster of
    the test's own (private_cluster.py), with an operator of its own: the
    shared cluster's tests go on meanwhile. Its Lease lasts longer than the
    outage: a leader that cannot renew its Lease in time exits on purpose (a
    standby may have taken over), which is not what this test is about."""
    with private_cluster(cluster, "apiserver-restart", port_base=17600) as own:
        kubeconfig = install_crd_and_rbac(own.cluster, own.env)
        namespace = "survivors"
        own.cluster.kubectl("create", "namespace", namespace)
        handle = OperatorProcess(cluster=own.cluster, kubeconfig=kubeconfig, args=["-n", namespace],
                                 log_path=own.cluster.kubeconfig.parent / "logs" / "operator-e2e-apiserver.log",
                                 lease_seconds=120)
        with clean_log(handle):
            api_server_restart(own, namespace, handle)


def api_server_restart(own: PrivateCluster, namespace: str, operator: OperatorProcess) -> None:
    cluster = own.cluster
    names = [f"survivor-{index}" for index in range(8)]
    for name in names:
        apply_db(cluster, namespace, name, {"replicas": 1, "version": "15.2", "storage": "1Gi"})
        time.sleep(1.2)
    for name in names:
        wait_ready(cluster, namespace, name)
    time.sleep(10)  # one quiet resync period: every loop is now on its own 10 s beat
    pid, mark = operator.process.pid, len(operator.log_since_start())
    outage = time.monotonic()
    restarted = own.run("restart-apiserver")
    assert restarted.returncode == 0, restarted.stderr
    back = time.monotonic()
    for name in names:
        patch_spec(cluster, namespace, name, {"replicas": 2})

    def lagging():
        dbs = {d["metadata"]["name"]: d for d in get_json(cluster, "-n", namespace, "mydb")["items"]}
        return [n for n in names if not ((dbs[n].get("status") or {}).get("ready") and dbs[n]["status"].get(
            "readyReplicas") == 2 and dbs[n]["status"].get("observedGeneration") == dbs[n]["metadata"]["generation"])]
    deadline, late = back + 45, names
    while late and time.monotonic() < deadline:
        late = lagging()
        time.sleep(1)
    converged = time.monotonic() - back
    print(f"\nAPI server restart took {back - outage:.1f}s; all 8 scaled and Ready {converged:.1f}s after it")
    assert not late, f"not converged 45 s after the API server came back: {late}"
    assert operator.process.pid == pid and operator.process.poll() is None, "the operator was restarted or died"
    after = operator.log_since_start()[mark:]
    assert "Traceback" not in after and "failed with an exception" not in after, after[-3000:]
    assert converged < 30, f"took {converged:.0f}s: a reconcile loop was stalled by the outage"


# -------------------------------------------------- 3. Helm release stuck pending


def assert_recovered(cluster, namespace: str, name: str, replicas: int, above: int) -> None:
    wait_for(f"{name}: StatefulSet at {replicas}", lambda: sts_replicas(cluster, namespace, name) == replicas,
             timeout=120)
    wait_ready(cluster, namespace, name)
    entries = history(cluster, namespace, name)
    latest = max(entries, key=lambda e: e["revision"])
    assert latest["status"] == "deployed" and latest["revision"] > above, entries
    # The stuck revision itself stays in the history as it was (Helm rewrites no old record); none after it is.
    assert not [e for e in entries if e["status"].startswith("pending") and e["revision"] > above], entries
    assert [e["status"] for e in entries].count("deployed") == 1, entries
    st = status(cluster, namespace, name)
    assert st["release"]["revision"] == latest["revision"] and st["readyReplicas"] == replicas


def test_release_stuck_pending_upgrade_or_rollback_is_recovered(cluster, operator, namespace):
    """A release left pending-upgrade or pending-rollback (Helm killed mid-run) does not block the next change."""
    apply_db(cluster, namespace, "stuck", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "stuck")
    patch_spec(cluster, namespace, "stuck", {"replicas": 2})
    assert_recovered(cluster, namespace, "stuck", 2, above=1)  # plain upgrade: revision 2, the baseline

    for state, replicas in (("pending-upgrade", 3), ("pending-rollback", 1)):
        stuck_at = make_stuck(cluster, namespace, "stuck", state)
        patch_spec(cluster, namespace, "stuck", {"replicas": replicas})
        assert_recovered(cluster, namespace, "stuck", replicas, above=stuck_at)
        assert condition(cluster, namespace, "stuck", "Ready")["status"] == "True"
    assert f"release {namespace}/stuck was left half-done" in operator.log_since_start()


def test_release_stuck_pending_install_or_uninstalling_is_recovered_keeping_the_data(cluster, operator, namespace):
    """A first install left pending-install is redone on the next change; so is one whose recovery (an
    uninstall) was itself killed, leaving it "uninstalling". Claims and credentials survive both."""
    apply_db(cluster, namespace, "fresh", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "fresh")
    assert [e["revision"] for e in history(cluster, namespace, "fresh")] == [1]
    claim_uid = get_json(cluster, "-n", namespace, "pvc", "data-fresh-0")["metadata"]["uid"]
    secret_uid = get_json(cluster, "-n", namespace, "secret", "fresh-credentials")["metadata"]["uid"]
    for state, replicas in (("pending-install", 2), ("uninstalling", 1)):
        make_stuck(cluster, namespace, "fresh", state)
        patch_spec(cluster, namespace, "fresh", {"replicas": replicas})
        # Nothing of a half-done install can be trusted: the release is uninstalled and installed afresh.
        assert_recovered(cluster, namespace, "fresh", replicas, above=0)
        assert [e["revision"] for e in history(cluster, namespace, "fresh")] == [1], state
        assert get_json(cluster, "-n", namespace, "pvc", "data-fresh-0")["metadata"]["uid"] == claim_uid
        assert get_json(cluster, "-n", namespace, "secret", "fresh-credentials")["metadata"]["uid"] == secret_uid


# ------------------------------------------- 4. an upgrade Kubernetes refuses


def chart_with_immutable_change(target: Path) -> Path:
    """A copy of the bundled chart whose StatefulSet names another governing Service: an immutable field.

    (The selector would do too, but the operator's start-up check refuses a chart that selects differently;
    a changed podManagementPolicy, the operator re-creates the StatefulSet for.)"""
    chart = target / "mydatabase"
    shutil.copytree(REPO / "charts" / "mydatabase", chart)
    path = chart / "templates" / "statefulset.yaml"
    text = path.read_text()
    governing = "serviceName: {{ $fullname }}-headless\n"
    assert text.count(governing) == 1, "the chart's StatefulSet changed shape"
    path.write_text(text.replace(governing, "serviceName: {{ $fullname }}-governing\n"))
    return chart


@pytest.mark.long
def test_refused_upgrade_backs_off_without_rollback_or_event_storm(cluster, operator, namespace, tmp_path):
    """An upgrade the API server refuses (an immutable StatefulSet field) fails clearly, retried with backoff only.

    Phase Failed, reason HelmFailed naming the forbidden change, one Warning
    Event for all retries, at most 4 Helm attempts in 45 s (5, 10, 20 s
    apart), history within --history-max, and never a rollback."""
    apply_db(cluster, namespace, "rigid", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "rigid")
    before = max(e["revision"] for e in history(cluster, namespace, "rigid"))
    chart = chart_with_immutable_change(tmp_path)
    with operator_instead(operator, namespace, "operator-e2e-immutable.log", MYDB_CHART_DIR=str(chart)) as custom:
        wait_for("phase Failed", lambda: status(cluster, namespace, "rigid").get("phase") == "Failed", timeout=60)
        first_failure = time.monotonic()
        ready = condition(cluster, namespace, "rigid", "Ready")
        assert ready["reason"] == "HelmFailed", ready
        assert "StatefulSet" in ready["message"] and "Forbidden" in ready["message"], ready["message"]
        assert "updates to statefulset spec" in ready["message"], ready["message"]

        lengths = []
        while time.monotonic() - first_failure < 45:
            lengths.append(len(history(cluster, namespace, "rigid")))
            time.sleep(1)
        # An attempt may be under way as the window closes (pending-upgrade): its outcome is what counts.
        wait_for(
            "no Helm attempt under way",
            lambda: all(e["status"] != "pending-upgrade" for e in history(cluster, namespace, "rigid")),
            timeout=30,
        )
        entries = history(cluster, namespace, "rigid")
        attempts = max(e["revision"] for e in entries) - before
        print(f"\nrefused upgrade: {attempts} Helm attempts in ~45 s, history lengths {sorted(set(lengths))}")
        assert 3 <= attempts <= 4, (attempts, entries)  # the first and its retries 5, 15 and 35 s later
        assert max(lengths) <= HISTORY_MAX and len(entries) <= HISTORY_MAX, (lengths, entries)
        assert not [e for e in entries if "rollback" in (e.get("description") or "").lower()], entries
        failed = sorted((e for e in entries if e["revision"] > before), key=lambda e: e["revision"])
        assert all(e["status"] == "failed" for e in failed), failed
        retries = [line for line in custom.log_since_start().splitlines() if f"{namespace}/rigid: HelmFailed" in line]
        delays = [int(m) for m in re.findall(r"retry in (\d+)s", "\n".join(retries))]
        assert len(delays) >= 3 and delays == [BACKOFF_FIRST * 2 ** i for i in range(len(delays))], delays
        warnings = warning_events(cluster, namespace, "rigid", "HelmFailed")
        assert len(warnings) == 1 and event_count(warnings) == 1, warnings
        assert status(cluster, namespace, "rigid")["phase"] == "Failed"
        assert custom.process.poll() is None
        assert "Traceback" not in custom.log_since_start()
    # Back on the bundled chart, nothing needs changing: the database reports Ready again.
    wait_ready(cluster, namespace, "rigid")


# ------------------------------------------------------------ 5. drift repair



def drifty(cluster, namespace: str) -> None:
    apply_db(cluster, namespace, "drift", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                           "backup": {"schedule": "0 3 * * *"}})
    wait_ready(cluster, namespace, "drift")
    assert cron_schedule(cluster, namespace, "drift") == "0 3 * * *"


def test_statefulset_scaled_by_hand_is_scaled_back(cluster, operator, namespace):
    """kubectl scale on the StatefulSet itself is reverted to spec.replicas, and the database stays Ready."""
    drifty(cluster, namespace)
    cluster.kubectl("scale", "-n", namespace, "statefulset/drift", "--replicas=4")
    wait_for("StatefulSet back at 2", lambda: sts_replicas(cluster, namespace, "drift") == 2, timeout=30)
    wait_ready(cluster, namespace, "drift")
    assert status(cluster, namespace, "drift")["readyReplicas"] == 2
    said = [line for line in operator.log_since_start().splitlines() if f"{namespace}/drift: " in line]
    assert any("putting back" in line and "the StatefulSet has 4 replicas instead of 2" in line for line in said), said


def test_deleted_backup_cronjob_is_recreated(cluster, operator, namespace):
    """A backup CronJob deleted by hand comes back with the spec's schedule (the spec hash did not change)."""
    drifty(cluster, namespace)
    uid = get_json(cluster, "-n", namespace, "cronjob", "drift-backup")["metadata"]["uid"]
    cluster.kubectl("delete", "-n", namespace, "cronjob", "drift-backup")
    wait_for("CronJob re-created", lambda: get_json(cluster, "-n", namespace, "cronjob", "drift-backup")
             .get("metadata", {}).get("uid") not in (None, uid), timeout=60)
    assert cron_schedule(cluster, namespace, "drift") == "0 3 * * *"
    wait_ready(cluster, namespace, "drift")
    assert logged(operator, f"{namespace}/drift: ", "the backup CronJob is missing")


def test_backup_schedule_edited_by_hand_is_put_back(cluster, operator, namespace):
    """A CronJob schedule edited by hand (kubectl patch) is put back to spec.backup.schedule."""
    drifty(cluster, namespace)
    cluster.kubectl("patch", "-n", namespace, "cronjob", "drift-backup", "--type=merge",
                    "-p", '{"spec":{"schedule":"*/5 * * * *"}}')
    wait_for("schedule put back", lambda: cron_schedule(cluster, namespace, "drift") == "0 3 * * *", timeout=30)
    wait_ready(cluster, namespace, "drift")
    assert logged(operator, f"{namespace}/drift: ", "the backup CronJob's schedule was changed")


# ---------------------------------------------------- 6. missing StorageClass


@pytest.mark.long
def test_missing_storage_class_fails_clearly_then_recovers_by_itself(cluster, operator, namespace):
    """storageClassName of a class that does not exist: Failed/StorageClassNotFound, one Warning, quiet retries
    (the back-off's, up to one per resync: a user makes the class).

    Once the class is created, the CR becomes Ready on its own (the next
    retry), without any edit."""
    class_name = f"late-{namespace[-5:]}"
    apply_db(cluster, namespace, "nosc", {"replicas": 1, "version": "15.2", "storage": "1Gi",
                                          "storageClassName": class_name})
    try:
        wait_for("StorageClassNotFound", lambda: condition(cluster, namespace, "nosc", "Ready").get("reason")
                 == "StorageClassNotFound", timeout=60)
        st = status(cluster, namespace, "nosc")
        assert st["phase"] == "Failed" and st["ready"] is False
        assert class_name in st["message"] and "storageClassName" in st["message"], st["message"]
        assert get_json(cluster, "-n", namespace, "statefulset", "nosc") == {}, "Helm ran with an unusable class"

        def retry_lines():
            return [line for line in operator.log_since_start().splitlines()
                    if f"{namespace}/nosc: StorageClassNotFound" in line]
        wait_for("three attempts", lambda: len(retry_lines()) >= 3, timeout=60)
        lines = retry_lines()
        delays = [int(m) for m in re.findall(r"retry in (\d+)s", "\n".join(lines))]
        assert len(delays) == len(lines)
        assert delays == [min(BACKOFF_FIRST * 2 ** i, operator.resync) for i in range(len(delays))], lines
        assert "Traceback" not in operator.log_since_start()
        warnings = warning_events(cluster, namespace, "nosc", "StorageClassNotFound")
        assert len(warnings) == 1 and event_count(warnings) == 1, warnings

        standard = get_json(cluster, "storageclass", "standard")
        late = {key: standard[key] for key in ("apiVersion", "kind", "provisioner", "reclaimPolicy",
                                               "volumeBindingMode")}
        late.update(metadata={"name": class_name}, allowVolumeExpansion=True)
        created = time.monotonic()
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(late))
        wait_ready(cluster, namespace, "nosc", timeout=150)
        print(f"\nrecovered {time.monotonic() - created:.0f}s after the StorageClass appeared "
              f"({len(retry_lines())} attempts logged)")
        assert condition(cluster, namespace, "nosc", "Degraded")["status"] == "False"
        claim = get_json(cluster, "-n", namespace, "pvc", "data-nosc-0")
        assert claim["spec"]["storageClassName"] == class_name
    finally:
        cluster.kubectl("delete", "-n", namespace, "mydb/nosc", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", class_name, "--ignore-not-found", check=False)
