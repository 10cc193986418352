"""Tests of charts/mydatabase rendered by the real helm CLI (no cluster needed)."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

from pathlib import Path

import pytest
import yaml
from manifests import documents

# Not imported from conftest: with several test folders, "conftest" is ambiguous.
CHART = Path(__file__).resolve().parents[2] / "charts" / "mydatabase"
CHART_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]

# Values equivalent to the seed MyDatabase (seed/seed-mydatabase.yaml).
SEED_VALUES = {
    "replicas": 3,
    "image": {"tag": "15.2"},
    "storage": {"size": "100Gi"},
    "credentials": {"secretName": "production-db-credentials"},
    "tls": {"enabled": True, "secretName": "production-db-tls"},
    "backup": {"enabled": True, "schedule": "0 2 * * *", "retention": "7d"},
}

RELEASE = "production-db"
NAMESPACE = "prod"
SECRET = SEED_VALUES["credentials"]["secretName"]
SELECTOR = {
    "app.kubernetes.io/name": "mydatabase",
    "app.kubernetes.io/instance": RELEASE,
}
STANDARD_LABELS = {
    "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
    "app.kubernetes.io/component", "app.kubernetes.io/managed-by", "helm.sh/chart",
}
SCRIPTS = ["entrypoint.sh", "role.sh", "follow.sh", "primary-init.sh", "replica-bootstrap.sh", "backup.sh",
           "prune.sh", "restore.sh", "credentials.sh", "test-connection.sh"]


def seed(**changes) -> dict:
    """The seed values with top-level keys replaced or deep-merged."""
    values = copy.deepcopy(SEED_VALUES)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key].update(value)
        else:
            values[key] = value
    return values


def container(pod_spec: dict, name: str) -> dict:
    return next(c for c in pod_spec.get("initContainers", []) + pod_spec["containers"] if c["name"] == name)


def env_of(c: dict) -> dict:
    return {e["name"]: e for e in c.get("env", [])}


def cronjob_pod(rendered) -> dict:
    return rendered.get("CronJob", f"{RELEASE}-backup")["spec"]["jobTemplate"]["spec"]["template"]


@pytest.fixture
def seeded(render):
    return render(seed())


def test_seed_statefulset(seeded):
    """The seed CR's values give 3 replicas, 100Gi claims, the 15.2 image and a
    name+instance-only selector, with the primary reachable through the headless Service."""
    sts = seeded.get("StatefulSet", RELEASE)
    spec = sts["spec"]
    assert spec["replicas"] == 3
    assert spec["serviceName"] == f"{RELEASE}-headless"
    # Pods start together: the primary may be any ordinal after a failover (its record says which).
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"]["type"] == "RollingUpdate"  # the chart alone; the operator passes OnDelete
    assert spec["selector"] == {"matchLabels": SELECTOR}

    [claim] = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "100Gi"

    pod = spec["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "database"
    pg = container(pod["spec"], "postgres")
    assert pg["image"] == "docker.io/library/postgres:15.2"
    assert pg["command"] == ["/bin/sh", "/scripts/entrypoint.sh", "serve"]
    assert pg["ports"] == [{"name": "postgresql", "containerPort": 5432, "protocol": "TCP"}]
    env = env_of(pg)
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["PGDATA"]["value"] == "/var/lib/postgresql/data/pgdata"
    assert env["PGPORT"]["value"] == "5432"
    # No fixed primary: role.sh reads the operator's record (ordinal 0 without one) and reaches the
    # primary as <pod>.PEER_DOMAIN.
    assert "PRIMARY_HOST" not in env
    assert env["PEER_DOMAIN"]["value"] == f"{RELEASE}-headless.{NAMESPACE}.svc"
    assert env["PRIMARY_RECORD"]["value"] == "/etc/mydatabase/primary/primary"
    # Every probe is a GET to the probe container, no exec (one a second cost the node about 30 ms of CPU);
    # which asks the server over the unix socket (over TCP with TLS on, each was a TLS handshake).
    for probe, path in (("startupProbe", "/ready"), ("readinessProbe", "/ready"), ("livenessProbe", "/alive")):
        assert pg[probe]["httpGet"] == {"path": path, "port": 8008}, probe
    # A container beside the server (a native sidecar would start one kubelet sync before the init containers).
    assert [c["name"] for c in pod["spec"]["containers"]] == ["postgres", "probe"]
    probe = container(pod["spec"], "probe")
    assert "restartPolicy" not in probe and [c["name"] for c in pod["spec"]["initContainers"]] == ["bootstrap"]
    assert probe["command"] == ["perl", "/scripts/probe.pl", "serve"] and probe["image"] == pg["image"]
    assert probe["ports"] == [{"name": "probe", "containerPort": 8008, "protocol": "TCP"}]
    assert {k: v.get("value", v.get("valueFrom")) for k, v in env_of(probe).items()} == {
        "PGPORT": "5432", "PROBE_PORT": "8008", "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
        "PGDATA": "/var/lib/postgresql/data/pgdata", "PEER_DOMAIN": f"{RELEASE}-headless.{NAMESPACE}.svc",
        "LEASE_NAME": f"{RELEASE}-primary", "LEASE_RENEW_SECONDS": "2", "LEASE_FENCE_SECONDS": "6",
        "LEASE_STATE_DIR": "/var/run/mydb-lease"}
    # The primary lease (lease.pl): its state written for the server's container, the ServiceAccount token (the
    # pod mounts none otherwise), and the data read-only (whether this standby follows a primary that asks).
    assert {m["mountPath"]: (m["name"], m.get("readOnly", False)) for m in probe["volumeMounts"]} == {
        "/scripts": ("scripts", True), "/var/run/postgresql": ("run", True), "/var/run/mydb-lease": ("lease", False),
        "/var/run/secrets/kubernetes.io/serviceaccount": ("lease-token", True),
        "/var/lib/postgresql/data": ("data", True)}
    assert pod["spec"]["automountServiceAccountToken"] is False and pod["spec"]["shareProcessNamespace"] is True
    assert pod["spec"]["serviceAccountName"] == f"{RELEASE}-primary"
    assert probe["securityContext"] == pg["securityContext"]
    # `kubectl logs` and `exec` without -c mean the server.
    assert pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == "postgres"
    mounts = {m["mountPath"]: m["name"] for m in pg["volumeMounts"]}
    assert mounts["/var/lib/postgresql/data"] == "data"
    assert mounts["/scripts"] == "scripts"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["scripts"]["configMap"] == {"name": f"{RELEASE}-scripts", "defaultMode": 0o555}
    assert mounts["/etc/mydatabase/primary"] == "primary-record"
    # The operator makes the record only when the primary first moves; the chart never renders it.
    assert volumes["primary-record"]["configMap"] == {"name": f"{RELEASE}-primary", "optional": True,
                                                      "defaultMode": 0o444}
    assert ("ConfigMap", f"{RELEASE}-primary") not in seeded.by_key
    assert "emptyDir" in volumes[mounts["/var/run/postgresql"]]
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_services_select_by_role(seeded):
    """Headless selects every pod (and publishes unready ones); the read-write
    Service adds role=primary and the read-only one role=replica."""
    headless = seeded.get("Service", f"{RELEASE}-headless")["spec"]
    assert headless["clusterIP"] == "None"
    assert headless["publishNotReadyAddresses"] is True
    assert headless["selector"] == SELECTOR

    rw = seeded.get("Service", RELEASE)["spec"]
    assert rw["type"] == "ClusterIP"
    assert rw["selector"] == {**SELECTOR, "myapp.example.com/role": "primary"}
    assert [(p["port"], p["targetPort"]) for p in rw["ports"]] == [(5432, "postgresql")]

    ro = seeded.get("Service", f"{RELEASE}-ro")["spec"]
    assert ro["selector"] == {**SELECTOR, "myapp.example.com/role": "replica"}
    assert len(seeded.kinds("Service")) == 3


def test_role_label_key_comes_from_values(render):
    """roleLabel changes the key the rw/ro Services select on."""
    out = render(seed(roleLabel="example.org/pg-role"))
    assert out.get("Service", RELEASE)["spec"]["selector"]["example.org/pg-role"] == "primary"
    assert out.get("Service", f"{RELEASE}-ro")["spec"]["selector"]["example.org/pg-role"] == "replica"


def test_seed_backup_cronjob_and_pvc(seeded):
    """backup.enabled gives a Forbid-concurrency CronJob on the seed schedule that
    dumps from the rw Service into a kept backups PVC, then prunes."""
    cj = seeded.get("CronJob", f"{RELEASE}-backup")["spec"]
    assert cj["schedule"] == "0 2 * * *"
    assert cj["concurrencyPolicy"] == "Forbid"
    assert cj["successfulJobsHistoryLimit"] == 3
    assert cj["failedJobsHistoryLimit"] == 3
    assert cj["jobTemplate"]["spec"]["backoffLimit"] == 1

    pod = cronjob_pod(seeded)
    assert pod["metadata"]["labels"] == {**SELECTOR, "app.kubernetes.io/component": "backup"}
    assert pod["spec"]["restartPolicy"] == "Never"
    c = container(pod["spec"], "backup")
    assert c["image"] == "docker.io/library/postgres:15.2"
    script = " ".join(c["command"])
    assert script.index("/scripts/backup.sh") < script.index("/scripts/prune.sh")
    env = env_of(c)
    assert env["PGHOST"]["value"] == RELEASE
    assert env["PGPORT"]["value"] == "5432"
    assert env["BACKUP_DIR"]["value"] == "/backups"
    assert env["BACKUP_RETENTION"]["value"] == "7d"
    assert {m["mountPath"]: m["name"] for m in c["volumeMounts"]}["/backups"] == "backups"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"]["claimName"] == f"{RELEASE}-backups"

    pvc = seeded.get("PersistentVolumeClaim", f"{RELEASE}-backups")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "10Gi"


def test_backup_disabled_renders_no_backup_objects(render):
    """With backup.enabled false there is no CronJob and no backups PVC."""
    out = render(seed(backup={"enabled": False}))
    assert out.kinds("CronJob") == []
    assert out.kinds("PersistentVolumeClaim") == []
    assert "StatefulSet" in {d["kind"] for d in out.docs}


def test_a_backup_job_has_a_deadline(render, helm):
    """One run at a time (Forbid): without a deadline a hung dump would skip every later schedule."""
    cron = render(seed()).kinds("CronJob")[0]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 21600
    cron = render(seed(backup={**SEED_VALUES["backup"], "deadlineSeconds": 3600})).kinds("CronJob")[0]
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 3600
    refused = helm("template", RELEASE, str(CHART), values=seed(backup={**SEED_VALUES["backup"], "deadlineSeconds": 5}))
    assert refused.returncode != 0 and "deadlineSeconds" in refused.stderr, refused.stderr


def test_backup_volume_access_modes(render):
    """The backups claim is ReadWriteOnce unless backup.storage.accessModes says
    otherwise (ReadWriteMany lets a restoring database on another node mount it)."""
    assert render(seed()).get("PersistentVolumeClaim", f"{RELEASE}-backups")["spec"]["accessModes"] \
        == ["ReadWriteOnce"]
    out = render(seed(backup={"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]}}))
    assert out.get("PersistentVolumeClaim", f"{RELEASE}-backups")["spec"]["accessModes"] == ["ReadWriteMany"]


def test_storage_class_only_when_set(render):
    """storageClassName is omitted for "" (cluster default) and rendered when set,
    for both the data claims and the backups claim."""
    default = render(seed())
    claim = default.get("StatefulSet", RELEASE)["spec"]["volumeClaimTemplates"][0]["spec"]
    assert "storageClassName" not in claim
    assert "storageClassName" not in default.get("PersistentVolumeClaim", f"{RELEASE}-backups")["spec"]

    out = render(seed(storage={"storageClassName": "fast"},
                      backup={"storage": {"size": "20Gi", "storageClassName": "cheap"}}))
    claim = out.get("StatefulSet", RELEASE)["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast"
    backups = out.get("PersistentVolumeClaim", f"{RELEASE}-backups")["spec"]
    assert backups["storageClassName"] == "cheap"
    assert backups["resources"]["requests"]["storage"] == "20Gi"


def test_credentials_only_as_files_from_the_secret(seeded, helm):
    """No Secret object, no literal credential and no credential in any environment: the database
    and backup containers mount credentials.secretName read-only (group-readable only, for
    PostgreSQL's fsGroup) and find it through CREDENTIALS_DIR; values cannot even carry a password."""
    assert seeded.kinds("Secret") == []
    pods = {
        ("StatefulSet", "postgres"): seeded.get("StatefulSet", RELEASE)["spec"]["template"]["spec"],
        ("CronJob", "backup"): cronjob_pod(seeded)["spec"],
    }
    for (kind, cname), pod in pods.items():
        c = container(pod, cname)
        env = env_of(c)
        assert not [name for name, e in env.items() if "secretKeyRef" in e.get("valueFrom", {})], kind
        assert not [name for name in env if re.search(r"PASS|SECRET|TOKEN", name)], kind
        mount = next(m for m in c["volumeMounts"] if m["name"] == "credentials")
        assert mount["readOnly"] is True
        assert env["CREDENTIALS_DIR"] == {"name": "CREDENTIALS_DIR", "value": mount["mountPath"]}
        volume = next(v for v in pod["volumes"] if v["name"] == "credentials")
        assert volume["secret"] == {"secretName": SECRET, "defaultMode": 0o440}, kind

    res = helm("template", RELEASE, str(CHART),
               values=seed(credentials={"secretName": SECRET, "password": "hunter2"}))
    assert res.returncode != 0
    assert "password" in res.stderr and "hunter2" not in res.stdout


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"replicas": -1}, "/replicas"),
        ({"replicas": "3"}, "/replicas"),
        ({"bogus": 1}, "bogus"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"storage": {"size": "lots"}}, "/storage/size"),
        ({"backup": {"retention": "7days"}}, "/backup/retention"),
        ({"backup": {"retention": "0d"}}, "/backup/retention"),
        ({"backup": {"schedule": "daily"}}, "/backup/schedule"),
        ({"backup": {"storage": {"size": "1Gi", "extra": True}}}, "extra"),
        ({"postgresql": {"port": 5432, "parameters": {"max_connections": 200}}},
         "/postgresql/parameters/max_connections"),
        ({"postgresql": {"port": 5432, "parameters": {"bad key": "x"}}},
         "/postgresql/parameters"),
        ({"podLabels": {"bad key!": "x"}}, "/podLabels"),
        ({"backup": {"storage": {"size": "1Gi", "accessModes": ["ReadWriteSometimes"]}}},
         "/backup/storage/accessModes"),
        ({"backup": {"storage": {"size": "1Gi", "accessModes": []}}}, "/backup/storage/accessModes"),
        ({"restore": {"enabled": True, "claimName": "a-backups", "bogus": 1}}, "bogus"),
        ({"restore": {"enabled": "yes", "claimName": "a-backups"}}, "/restore/enabled"),
        ({"restore": {"enabled": True, "claimName": "A_Backups"}}, "/restore/claimName"),
        ({"restore": {"enabled": True, "claimName": "a-backups", "backup": "../x.dump"}},
         "/restore/backup"),
        ({"restore": {"enabled": True, "claimName": "a-backups", "backup": "newest"}},
         "/restore/backup"),
    ],
)
def test_schema_rejects_bad_values(helm, changes, field):
    """values.schema.json rejects the bad value and helm's error names the field."""
    res = helm("template", RELEASE, str(CHART), values=seed(**changes))
    assert res.returncode != 0, res.stdout[:500]
    assert field in res.stderr, res.stderr


def test_lint_strict_passes(helm):
    """helm lint --strict passes with no warnings, with minimal and with seed values."""
    for args, values in ((["--set", "credentials.secretName=lint", "--set", "tls.secretName=lint"], None), ([], seed())):
        res = helm("lint", "--strict", str(CHART), *args, values=values)
        output = res.stdout + res.stderr
        assert res.returncode == 0, output
        assert "[WARNING]" not in output and "[ERROR]" not in output, output


def test_missing_secret_name_fails_clearly(helm):
    """Without credentials.secretName rendering fails and says what is missing."""
    res = helm("template", "x", str(CHART))
    assert res.returncode != 0
    assert "credentials.secretName is required" in res.stderr, res.stderr


def test_defaults_render_with_only_secret_name(render):
    """values.yaml defaults plus a Secret name render a one-pod database (no disruption budget),
    no backups, its NetworkPolicy and `helm test` pod, every object in the release namespace."""
    out = render(None, "--set", "credentials.secretName=x", "--set", "tls.secretName=x", release="db", namespace="team-a")
    assert sorted(out.by_key) == sorted([
        ("ConfigMap", "db-scripts"), ("StatefulSet", "db"), ("Service", "db"),
        ("Service", "db-headless"), ("Service", "db-ro"), ("NetworkPolicy", "db"), ("Pod", "db-test"),
        # The primary lease's rights (scripts/lease.pl): this Lease alone, read and renewed.
        ("ServiceAccount", "db-primary"), ("Role", "db-primary"), ("RoleBinding", "db-primary"),
    ])
    assert out.get("Role", "db-primary")["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                                        "resourceNames": ["db-primary"], "verbs": ["get", "patch"]}]
    assert out.get("StatefulSet", "db")["spec"]["replicas"] == 1
    assert all(d["metadata"]["namespace"] == "team-a" for d in out.docs)


def test_hibernation_scales_statefulset_to_zero(render):
    """replicas: 0 is valid and scales the StatefulSet to zero while keeping everything else."""
    out = render(seed(replicas=0))
    assert out.get("StatefulSet", RELEASE)["spec"]["replicas"] == 0
    assert out.kinds("Service") and out.kinds("CronJob")
    # No server to dump: the schedule waits (a failed Job each night would raise BackupHealthy's alarm).
    assert out.kinds("CronJob")[0]["spec"]["suspend"] is True
    # No server to stream from either: the archive's pod goes too, its StatefulSet and the backup volume stay.
    assert out.get("StatefulSet", f"{RELEASE}-wal")["spec"]["replicas"] == 0
    assert render(seed()).get("StatefulSet", f"{RELEASE}-wal")["spec"]["replicas"] == 1
    assert render(seed()).kinds("CronJob")[0]["spec"]["suspend"] is False


def test_parameters_render_sorted_and_quoted(render):
    """postgresql.parameters become sorted key = 'value' lines, quotes and backslashes escaped."""
    params = {"work_mem": "64MB", "max_connections": "200", "log_line_prefix": "it's a \\ test",
              "pg_stat_statements.max": "10000"}
    out = render(seed(postgresql={"port": 5432, "parameters": params}))
    conf = out.get("ConfigMap", f"{RELEASE}-scripts")["data"]["postgresql.conf"]
    lines = [ln for ln in conf.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines == [
        "wal_log_hints = 'on'",  # the chart's own, first: pg_rewind needs it (a denied parameter)
        "max_replication_slots = '20'",  # a slot and a walsender per replica (16 at most) and the archive's
        "max_wal_senders = '20'",
        "log_line_prefix = 'it''s a \\\\ test'",
        "max_connections = '200'",
        "pg_stat_statements.max = '10000'",
        "wal_keep_size = '256MB'",
        "work_mem = '64MB'",
        "max_slot_wal_keep_size = '1GB'",  # backup.maxRetainedWal: the replicas' and the archive's slots keep no more
    ]


def test_parameter_change_rolls_pods(render):
    """The pod template's checksum/scripts annotation changes with the parameters,
    so a changed postgresql.conf restarts the pods."""
    def checksum(values):
        sts = render(values).get("StatefulSet", RELEASE)
        return sts["spec"]["template"]["metadata"]["annotations"]["checksum/scripts"]

    base = checksum(seed())
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum(seed()) == base
    assert checksum(seed(postgresql={"port": 5432, "parameters": {"work_mem": "8MB"}})) != base
    # Only the ConfigMap's data counts: the owner (set once per database) and labels restart nothing.
    owner = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "name": RELEASE, "uid": "u-1"}
    assert checksum(seed(owner=owner)) == base


@pytest.mark.parametrize("script, restarts", [
    ("entrypoint.sh", True), ("primary-init.sh", True), ("replica-bootstrap.sh", True), ("restore.sh", True),
    ("credentials.sh", True), ("recover.sh", True), ("wal-restore.sh", True), ("backup.sh", False),
    ("base-backup.sh", False), ("prune.sh", False), ("test-connection.sh", False), ("wal-archive.sh", False),
    ("verify.sh", False), ("major-upgrade.sh", False), ("old-binaries.sh", False), ("stamps.sh", True),
])
def test_only_the_scripts_database_pods_run_restart_them(helm, tmp_path, script, restarts):
    """A fixed backup or test script reaches its next run through the ConfigMap; only a script the
    database pods run changes their checksum/scripts annotation."""
    def checksum(chart):
        res = helm("template", RELEASE, str(chart), values=seed())
        assert res.returncode == 0, res.stderr
        [sts] = [d for d in documents(res.stdout)
                 if d["kind"] == "StatefulSet" and d["metadata"]["name"] == RELEASE]
        return sts["spec"]["template"]["metadata"]["annotations"]["checksum/scripts"]

    changed = tmp_path / "chart"
    shutil.copytree(CHART, changed)
    path = changed / "scripts" / script
    path.write_text(path.read_text() + "# changed\n")
    assert (checksum(changed) != checksum(CHART)) is restarts


def test_standard_labels_everywhere(render):
    """Every object carries the six standard labels; pod labels add podLabels but
    can never override the selector labels."""
    out = render(seed(podLabels={"team": "payments", "app.kubernetes.io/name": "evil"},
                      podAnnotations={"example.com/note": "x"}))
    for d in out.docs:
        labels = d["metadata"]["labels"]
        assert STANDARD_LABELS <= set(labels), (d["kind"], d["metadata"]["name"])
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == f"mydatabase-{CHART_VERSION}"
        assert labels["app.kubernetes.io/version"] == "15.2"
    pod_meta = out.get("StatefulSet", RELEASE)["spec"]["template"]["metadata"]
    assert pod_meta["labels"] == {**SELECTOR, "app.kubernetes.io/component": "database",
                                  "team": "payments", "myapp.example.com/role": "replica"}
    assert pod_meta["annotations"]["example.com/note"] == "x"


def test_immutable_fields_stable_across_versions(render):
    """Changing the PostgreSQL version changes the image but neither the selector
    nor the volumeClaimTemplates (both immutable on a StatefulSet)."""
    a = render(seed()).get("StatefulSet", RELEASE)["spec"]
    b = render(seed(image={"tag": "16.4"})).get("StatefulSet", RELEASE)["spec"]
    assert a["selector"] == b["selector"]
    assert a["volumeClaimTemplates"] == b["volumeClaimTemplates"]
    assert a["serviceName"] == b["serviceName"]
    assert container(b["template"]["spec"], "postgres")["image"].endswith(":16.4")


def test_restricted_security_context(seeded):
    """Database and backup pods meet the restricted Pod Security profile, with a
    read-only root filesystem."""
    for pod in (seeded.get("StatefulSet", RELEASE)["spec"]["template"], cronjob_pod(seeded)):
        psc = pod["spec"]["securityContext"]
        assert psc["runAsNonRoot"] is True
        assert (psc["runAsUser"], psc["runAsGroup"], psc["fsGroup"]) == (999, 999, 999)
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["spec"]["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert sc["readOnlyRootFilesystem"] is True


def test_passthrough_scheduling_and_resources(render):
    """imagePullSecrets, nodeSelector, tolerations, affinity and resources reach the
    database pod; absent when unset."""
    extra = {
        "imagePullSecrets": [{"name": "regcred"}],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "db", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    spec = render(seed(**extra)).get("StatefulSet", RELEASE)["spec"]["template"]["spec"]
    for key in ("imagePullSecrets", "nodeSelector", "tolerations", "affinity"):
        assert spec[key] == extra[key], key
    assert container(spec, "postgres")["resources"] == extra["resources"]

    bare = render(seed()).get("StatefulSet", RELEASE)["spec"]["template"]["spec"]
    for key in ("imagePullSecrets", "nodeSelector", "tolerations"):
        assert key not in bare, key
    assert bare["affinity"] == ANTI_AFFINITY["soft"]
    assert container(bare, "postgres")["resources"] == SMALL_DATABASE


DATABASE_PODS = {"topologyKey": "kubernetes.io/hostname",
                 "labelSelector": {"matchLabels": {**SELECTOR, "app.kubernetes.io/component": "database"}}}
ANTI_AFFINITY = {
    "soft": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": DATABASE_PODS}]}},
    "hard": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [DATABASE_PODS]}},
}


def test_anti_affinity_preset_spreads_database_pods_unless_affinity_is_given(render):
    """soft (default) prefers one database pod per node, hard requires it, none sets nothing; a given
    affinity replaces the preset; backup pods never get it (they share the instance labels): they go where
    the archive pod is, which has the backup volume."""
    with_archive = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "mydatabase", "app.kubernetes.io/instance": RELEASE,
                                          "app.kubernetes.io/component": "wal-archive"}}}]}}
    for preset, expected in ANTI_AFFINITY.items():
        out = render(seed(podAntiAffinityPreset=preset))
        assert out.get("StatefulSet", RELEASE)["spec"]["template"]["spec"]["affinity"] == expected, preset
        assert cronjob_pod(out)["spec"]["affinity"] == with_archive
        assert "affinity" not in out.get("StatefulSet", f"{RELEASE}-wal")["spec"]["template"]["spec"]
    dumps_only = render(seed(backup={"enabled": True, "continuous": False}))
    assert "affinity" not in cronjob_pod(dumps_only)["spec"]
    assert "affinity" not in render(seed(podAntiAffinityPreset="none")).get(
        "StatefulSet", RELEASE)["spec"]["template"]["spec"]
    own = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert render(seed(affinity=own)).get("StatefulSet", RELEASE)["spec"]["template"]["spec"]["affinity"] == own


SMALL_DATABASE = {"requests": {"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "64Mi"},
                  "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}}
SMALL_BACKUP = {"requests": {"cpu": "50m", "memory": "64Mi", "ephemeral-storage": "16Mi"},
                "limits": {"cpu": "500m", "memory": "512Mi", "ephemeral-storage": "256Mi"}}


def every_container(out) -> dict[str, dict]:
    """'<kind>/<container>' -> container, for every container the chart renders (test pod included)."""
    pods = {"StatefulSet": out.get("StatefulSet", RELEASE)["spec"]["template"]["spec"],
            "CronJob": cronjob_pod(out)["spec"], "Pod": out.get("Pod", f"{RELEASE}-test")["spec"]}
    return {f"{kind}/{c['name']}": c for kind, pod in pods.items()
            for c in pod.get("initContainers", []) + pod["containers"]}


def test_resources_presets_fit_a_resource_quota(render):
    """By default every container has CPU and memory requests and limits (a namespace whose
    ResourceQuota counts them accepts the pods): the small presets. `resources` replaces a
    preset whole; a preset can be chosen per kind, and `none` leaves the container without."""
    containers = every_container(render(seed()))
    assert containers["StatefulSet/postgres"]["resources"] == SMALL_DATABASE
    assert containers["CronJob/backup"]["resources"] == SMALL_BACKUP
    assert containers["Pod/test"]["resources"] == SMALL_BACKUP
    for name, c in containers.items():
        for part in ("requests", "limits"):
            assert {"cpu", "memory", "ephemeral-storage"} <= set(c["resources"][part]), (name, part)

    own = {"requests": {"memory": "2Gi"}}
    chosen = every_container(render(seed(resources=own, backup={**seed()["backup"], "resourcesPreset": "large"})))
    assert chosen["StatefulSet/postgres"]["resources"] == own
    assert chosen["CronJob/backup"]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "16Mi"},
        "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "256Mi"}}
    medium = every_container(render(seed(resourcesPreset="medium")))["StatefulSet/postgres"]["resources"]
    assert medium == {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "64Mi"},
                      "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "2Gi"}}
    out = render(seed())
    for pod in (out.get("StatefulSet", RELEASE)["spec"]["template"], cronjob_pod(out),
                out.get("Pod", f"{RELEASE}-test")):
        for volume in pod["spec"]["volumes"]:
            if "emptyDir" in volume:
                assert volume["emptyDir"].get("sizeLimit"), (pod["metadata"].get("name"), volume["name"])
    # The probe container's own (probe.resources): it answers about a request a second.
    assert containers["StatefulSet/probe"]["resources"] == {
        "requests": {"cpu": "5m", "memory": "24Mi", "ephemeral-storage": "8Mi"},
        "limits": {"cpu": "100m", "memory": "48Mi", "ephemeral-storage": "64Mi"}}
    bare = every_container(render(seed(resourcesPreset="none", backup={**seed()["backup"], "resourcesPreset": "none"},
                                       probe={"port": 8008, "resources": None})))
    assert all("resources" not in c for c in bare.values()), bare


def test_disruption_budget_at_two_pods_or_more(render):
    """At 2+ pods one PodDisruptionBudget (maxUnavailable 1) over the database pods only; none at
    1 pod, when hibernated, or when disabled."""
    out = render(seed(replicas=3))
    pdb = out.get("PodDisruptionBudget", RELEASE)["spec"]
    assert pdb == {"maxUnavailable": 1,
                   "selector": {"matchLabels": {**SELECTOR, "app.kubernetes.io/component": "database"}}}
    pod_labels = out.get("StatefulSet", RELEASE)["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()
    assert cronjob_pod(out)["metadata"]["labels"]["app.kubernetes.io/component"] != "database"
    for values in (seed(replicas=1), seed(replicas=0), seed(replicas=3, podDisruptionBudget={"enabled": False})):
        assert render(values).kinds("PodDisruptionBudget") == [], values["replicas"]


def test_network_policy_admits_own_pods_and_the_allowed_clients(render):
    """One NetworkPolicy selects every pod of the release and admits ingress only to the PostgreSQL port,
    from the release's own pods (replicas, backup Jobs, the test pod: same instance labels), the pods of the
    namespace labelled <release>-client: "true", the operator's pods in mydb-system, plus allowedClients
    (default: none); the backup and test pods have no such port, so nothing gets into them. Disabled, there
    is none."""
    out = render(seed(replicas=3))
    [policy] = [doc["spec"] for doc in out.docs if doc["kind"] == "NetworkPolicy"]
    sts = out.get("StatefulSet", RELEASE)["spec"]["template"]
    assert policy["podSelector"] == {"matchLabels": SELECTOR}
    assert policy["policyTypes"] == ["Ingress"]
    [rule, peers] = policy["ingress"]
    # A primary that cannot reach the API server asks its peers (the primary lease): their probe port, from them.
    assert peers == {"ports": [{"port": "probe", "protocol": "TCP"}], "from": [{"podSelector": {"matchLabels": SELECTOR}}]}
    port = container(sts["spec"], "postgres")["ports"][0]
    assert rule["ports"] == [{"port": port["name"], "protocol": "TCP"}]
    own = {"podSelector": {"matchLabels": SELECTOR}}
    labelled = {"podSelector": {"matchLabels": {f"{RELEASE}-client": "true"}}}
    operator = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mydb-system"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mydatabase-operator"}}}
    assert rule["from"] == [own, labelled, operator]
    assert {"podSelector": {}} not in rule["from"]  # not every pod of the namespace
    for pod in (sts, cronjob_pod(out), out.get("Pod", f"{RELEASE}-test")):
        assert SELECTOR.items() <= pod["metadata"]["labels"].items()
    for pod_spec in (cronjob_pod(out)["spec"], out.get("Pod", f"{RELEASE}-test")["spec"]):
        named = [p.get("name") for c in pod_spec["containers"] + pod_spec.get("initContainers", [])
                 for p in c.get("ports", [])]
        assert port["name"] not in named, named

    clients = [{"podSelector": {"matchLabels": {"db-client": "true"}}},
               {"namespaceSelector": {"matchLabels": {"team": "payments"}}}]
    elsewhere = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "operators"}}}]
    widened = render(seed(networkPolicy={"enabled": True, "allowedClients": clients, "operator": elsewhere}))
    assert widened.get("NetworkPolicy", RELEASE)["spec"]["ingress"][0]["from"] == [own, labelled, *elsewhere,
                                                                                     *clients]
    assert render(seed(networkPolicy={"enabled": False})).kinds("NetworkPolicy") == []
    strict = render(seed(networkPolicy={"enabled": True, "clientLabel": False, "allowedClients": clients}))
    assert strict.get("NetworkPolicy", RELEASE)["spec"]["ingress"][0]["from"] == [own, operator, *clients]


def test_image_by_digest_and_pull_policy(render):
    """image.digest pins the reference (tag kept for people) in every container; pullPolicy reaches each."""
    digest = "sha256:" + "ab" * 32
    out = render(seed(image={**seed()["image"], "digest": digest, "pullPolicy": "Always"}))
    for name, c in every_container(out).items():
        assert c["image"] == f"docker.io/library/postgres:15.2@{digest}", name
        assert c["imagePullPolicy"] == "Always", name


def test_too_long_name_fails(helm):
    """Names that would break the StatefulSet (52) or CronJob (45 + -backup) limits
    fail rendering instead of being silently truncated."""
    res = helm("template", "a" * 53, str(CHART), "--set", "credentials.secretName=x", "--set", "tls.secretName=x")
    assert res.returncode != 0 and "at most 52" in res.stderr, res.stderr
    res = helm("template", "a" * 46, str(CHART), values=seed())
    assert res.returncode != 0 and "at most 45" in res.stderr, res.stderr
    res = helm("template", "a" * 45, str(CHART), values=seed())
    assert res.returncode == 0, res.stderr


# --- the scripts, taken from the rendered ConfigMap -------------------------

@pytest.fixture
def scripts_dir(seeded, tmp_path):
    data = seeded.get("ConfigMap", f"{RELEASE}-scripts")["data"]
    d = tmp_path / "scripts"
    d.mkdir()
    for name, text in data.items():
        (d / name).write_text(text)
    return d


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_are_strict_posix_sh(scripts_dir, name):
    """Each script is in the ConfigMap, parses under dash (POSIX sh) and runs with set -eu (a sourced
    library runs under its caller's, and is sourced by every script that needs it)."""
    path = scripts_dir / name
    text = path.read_text()
    if name == "credentials.sh":
        users = [s for s in SCRIPTS if "credential" in (scripts_dir / s).read_text() and s != name]
        assert all("/credentials.sh\"" in (scripts_dir / s).read_text() for s in users), users
    elif name == "role.sh":
        assert '. "$SCRIPTS_DIR/role.sh"' in (scripts_dir / "entrypoint.sh").read_text()
    else:
        assert re.search(r"^set -eu$", text, re.M), name
    sh = shutil.which("dash") or "/bin/sh"
    res = subprocess.run([sh, "-n", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def _stamp(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ")


def _prune(scripts_dir, backups, retention, now):
    env = {"PATH": os.environ["PATH"], "BACKUP_DIR": str(backups),
           "BACKUP_RETENTION": retention, "NOW": str(int(now.timestamp()))}
    return subprocess.run(["sh", str(scripts_dir / "prune.sh")], env=env,
                          capture_output=True, text=True)


def test_prune_deletes_old_dumps_only(scripts_dir, tmp_path):
    """prune.sh removes dumps (and checksums) older than the retention, keeps newer
    ones and never touches files it did not write."""
    now = datetime(2024, 3, 10, 2, 0, 0, tzinfo=timezone.utc)
    backups = tmp_path / "backups"
    backups.mkdir()
    ages = {"old": timedelta(days=10), "edge": timedelta(days=7, seconds=1),
            "kept": timedelta(days=6, hours=23), "new": timedelta(hours=1)}
    names = {k: _stamp(now - v) + ".dump" for k, v in ages.items()}
    for n in names.values():
        (backups / n).write_text("dump")
        (backups / (n + ".sha256")).write_text("sum")
    (backups / "notes.txt").write_text("mine")

    res = _prune(scripts_dir, backups, "7d", now)
    assert res.returncode == 0, res.stderr
    left = sorted(p.name for p in backups.iterdir())
    assert left == sorted([names["kept"], names["kept"] + ".sha256",
                           names["new"], names["new"] + ".sha256", "notes.txt"])


@pytest.mark.parametrize("retention, kept", [("12h", 1), ("2w", 3), ("1h", 1)])
def test_prune_units_and_newest_always_kept(scripts_dir, tmp_path, retention, kept):
    """h/d/w retentions are honoured and the newest dump survives even when every
    dump is older than the retention."""
    now = datetime(2024, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
    backups = tmp_path / "backups"
    backups.mkdir()
    for days in (1, 3, 10):
        (backups / (_stamp(now - timedelta(days=days)) + ".dump")).write_text("x")
    res = _prune(scripts_dir, backups, retention, now)
    assert res.returncode == 0, res.stderr
    left = sorted(p.name for p in backups.iterdir())
    assert len(left) == kept
    assert left[-1] == _stamp(now - timedelta(days=1)) + ".dump"


@pytest.mark.parametrize("retention", ["7days", "0d", "07d"])
def test_prune_rejects_bad_retention(scripts_dir, tmp_path, retention):
    """A malformed BACKUP_RETENTION (one the CRD refuses) is an error, not 'delete everything'."""
    backups = tmp_path / "backups"
    backups.mkdir()
    (backups / "20240101T000000Z.dump").write_text("x")
    (backups / "20230101T000000Z.dump").write_text("x")
    res = _prune(scripts_dir, backups, retention, datetime.now(timezone.utc))
    assert res.returncode != 0
    assert len(list(backups.iterdir())) == 2


# --- restore from another database's backups ---------------------------------

RESTORE = {"enabled": True, "claimName": "source-db-backups"}


def sts_pod(rendered) -> dict:
    return rendered.get("StatefulSet", RELEASE)["spec"]["template"]["spec"]


def test_restore_disabled_adds_nothing(seeded):
    """By default (restore.enabled false) the database pods mount no other claim and
    get no RESTORE_* variables."""
    pod = sts_pod(seeded)
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    for name in ("bootstrap", "postgres"):
        assert "/restore" not in {m["mountPath"] for m in container(pod, name)["volumeMounts"]}
        assert not [n for n in env_of(container(pod, name)) if n.startswith("RESTORE")]


def test_the_first_boot_runs_in_an_init_container_no_probe_limits(seeded):
    """initdb, a restore and a replica's clone run in the init container `bootstrap` (entrypoint.sh
    init): the same image, environment, mounts, resources and security context as the server's
    container, and no probe, so a clone or a restore may take hours. The server's startup probe then
    covers its start alone: one hour."""
    pod = sts_pod(seeded)
    [init] = pod["initContainers"]
    pg = container(pod, "postgres")
    assert init["name"] == "bootstrap"
    assert init["command"] == ["/bin/sh", "/scripts/entrypoint.sh", "init"]
    for key in ("image", "imagePullPolicy", "resources", "securityContext"):
        assert init[key] == pg[key], key
    # The server's container adds what the primary lease needs: it serves as primary once lease.pl confirms.
    lease = {"name": "LEASE_STATE_DIR", "value": "/var/run/mydb-lease"}
    assert init["env"] + [lease] == pg["env"]
    assert init["volumeMounts"] + [{"name": "lease", "mountPath": "/var/run/mydb-lease", "readOnly": True}] == pg[
        "volumeMounts"
    ]
    assert not [key for key in init if key.endswith("Probe")]
    assert pg["startupProbe"]["failureThreshold"] * pg["startupProbe"]["periodSeconds"] == 3600


def test_restore_mounts_the_source_claim_read_only_for_the_first_boot(render, seeded):
    """restore.enabled mounts restore.claimName (read-only, in the volume source and
    the mount) at /restore in the init container, with RESTORE_FROM = restore.backup
    (default latest) and RESTORE_DIR = /restore: the first boot restores, and the
    server's container neither sees the other database's backups nor needs a longer
    startup probe. No object is added (the claim is the source's) and the backup
    CronJob does not mount it."""
    out = render(seed(restore=RESTORE))
    pod = sts_pod(out)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["restore-source"] == {
        "name": "restore-source",
        "persistentVolumeClaim": {"claimName": "source-db-backups", "readOnly": True},
    }
    init = container(pod, "bootstrap")
    [mount] = [m for m in init["volumeMounts"] if m["name"] == "restore-source"]
    assert mount == {"name": "restore-source", "mountPath": "/restore", "readOnly": True}
    env = env_of(init)
    assert env["RESTORE_FROM"] == {"name": "RESTORE_FROM", "value": "latest"}
    assert env["RESTORE_DIR"] == {"name": "RESTORE_DIR", "value": "/restore"}
    pg = container(pod, "postgres")
    assert "restore-source" not in {m["name"] for m in pg["volumeMounts"]}
    assert not [n for n in env_of(pg) if n.startswith("RESTORE")]
    assert pg["startupProbe"]["failureThreshold"] * pg["startupProbe"]["periodSeconds"] == 3600

    assert sorted(out.by_key) == sorted(seeded.by_key)
    backup_pod = cronjob_pod(out)["spec"]
    assert "restore-source" not in {v["name"] for v in backup_pod["volumes"]}

    named = render(seed(restore={**RESTORE, "backup": "20260101T020000Z.dump"}))
    assert env_of(container(sts_pod(named), "bootstrap"))["RESTORE_FROM"]["value"] == "20260101T020000Z.dump"


def test_restore_without_claim_name_fails_clearly(helm):
    """restore.enabled without restore.claimName fails rendering and says what is missing."""
    res = helm("template", RELEASE, str(CHART), values=seed(restore={"enabled": True}))
    assert res.returncode != 0
    assert "restore.claimName is required" in res.stderr, res.stderr


def test_scripts_use_no_psql_command_newer_than_the_oldest_supported_major():
    """The chart runs PostgreSQL 13 to 17 with the image's own psql: \\getenv (psql 15) made every
    13 and 14 primary fail its first boot. Only this host's PostgreSQL 15 runs the scripts in tests/postgres,
    so the commands newer than 13 are refused here by name."""
    newer_than_13 = ("\\getenv", "\\bind", "\\dconfig", "\\close", "\\parse", "\\bind_named")
    for script in sorted((CHART / "scripts").glob("*.sh")):
        text = script.read_text()
        assert not [c for c in newer_than_13 if c in text], script.name


def test_names_and_values_yaml_would_read_as_numbers_or_booleans_stay_strings(helm):
    """A MyDatabase may be named 1234, and a StorageClass true: rendered unquoted, YAML would make them a
    number or a boolean, and the API server would refuse the objects."""
    res = helm("template", "1234", str(CHART), "--set-string", "storage.storageClassName=true",
               "--set-string", "backup.storage.storageClassName=1", "--set-string", "credentials.secretName=007", "--set-string", "tls.secretName=007",
               "--set-string", "restore.claimName=2024", values=seed(restore={"enabled": True, "backup": "latest"}))
    assert res.returncode == 0, res.stderr

    def scalars(node, path=""):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from scalars(value, f"{path}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from scalars(value, f"{path}[{index}]")
        else:
            yield path, node

    for doc in documents(res.stdout):
        for path, value in scalars(doc):
            if path.endswith((".name", ".instance", "storageClassName", "secretName", "claimName", ".value")):
                assert isinstance(value, str), (doc["kind"], path, value)
