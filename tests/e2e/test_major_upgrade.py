"""A major upgrade in place on real pods: 15 to 17 with pg_upgrade --link (policy/major_upgrade.py), its continuous
archive kept apart for 15 and started afresh for 17, one that pg_upgrade --check refuses, which leaves the
database serving on 15 with the reason in status, and one to a major the platform has no image for, refused
before any pod stops."""

from __future__ import annotations

import time

import pytest

from .realnode import images
from .test_real_postgres import ROW_FACTS, create_db, pod_uid, rows, sql, wait_streaming, write_rows
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e


def status(cluster, namespace: str, name: str) -> dict:
    return get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}


def upgrade_phase(cluster, namespace: str, name: str) -> str:
    return (status(cluster, namespace, name).get("upgrade") or {}).get("phase", "")


def events(cluster, namespace: str, name: str, reason: str) -> list[dict]:
    listed = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"reason={reason},involvedObject.kind=MyDatabase,involvedObject.name={name}")
    return listed.get("items") or []


@pytest.mark.long
def test_a_major_upgrade_keeps_every_row_and_a_refused_one_leaves_the_old_major_serving(
        cluster, real_operator, namespace):
    """Two databases at 15.2 with rows, both asked for the local 17: "up" (3 pods) is stopped, upgraded on its
    primary's volume, started on 17 with its replicas cloned again: every pod runs 17 from the trixie image
    (hack/images.sh's POSTGRES17_IMAGE: this is also the test that the local 17 runs),
    every row is there, the replicas stream, status and Events tell it. "stuck" has a regproc column, which
    pg_upgrade cannot carry over: its check fails, the data is untouched, the pod runs 15.2 again with the rows,
    and status says why. The operator is killed in the middle and goes on once restarted. Going back a major is
    refused at admission. "up" has the continuous archive: its 15 base backups and WAL are kept under
    postgresql-15/ and listed in status, 17 gets a base backup of its own at once, and a new 15 database
    recovers from the 15 archive with every row."""
    image = images()["POSTGRES17_IMAGE"]
    version = image.rsplit(":", 1)[1]
    create_db(cluster, namespace, "up", replicas=3, backup={"schedule": "0 3 * * *"})
    create_db(cluster, namespace, "stuck", replicas=1)
    for name in ("up", "stuck"):
        wait_for(f"mydb/{name} Ready", lambda: status(cluster, namespace, name).get("ready") is True, timeout=300)
    wait_streaming(cluster, namespace, "up-0", 2)
    write_rows(cluster, namespace, "up-0")
    first_15 = wait_for("up's first base backup", lambda: (status(cluster, namespace, "up").get("backup") or {}).get(
        "lastBaseBackup"), timeout=180)
    write_rows(cluster, namespace, "stuck-0")
    sql(cluster, namespace, "stuck-0", "create table refs (f regproc)")
    for name in ("up", "stuck"):
        cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge",
                        "-p", f'{{"spec": {{"version": "{version}"}}}}')

    # The operator is killed while the pods are down for the upgrade, and started again: it goes on from status.
    wait_for("up's pods stopping for the upgrade", lambda: upgrade_phase(cluster, namespace, "up") in (
        "Stopping", "Upgrading") and events(cluster, namespace, "up", "MajorUpgradeStarted"), timeout=120, interval=0.3)
    real_operator.crash()
    real_operator.start()
    wait_for("up upgraded", lambda: upgrade_phase(cluster, namespace, "up") == "Succeeded", timeout=600, interval=1)
    wait_for("up Ready on 17", lambda: (lambda s: s.get("ready") is True and s.get("version") == version)(
        status(cluster, namespace, "up")), timeout=300)
    for pod in ("up-0", "up-1", "up-2"):
        assert get_json(cluster, "-n", namespace, "pod", pod)["spec"]["containers"][0]["image"] == image
        assert sql(cluster, namespace, pod, "show server_version").startswith(f"{version} ")
    assert [sql(cluster, namespace, pod, "select pg_is_in_recovery()") for pod in ("up-0", "up-1", "up-2")] == [
        "f", "t", "t"]
    wait_streaming(cluster, namespace, "up-0", 2)
    for pod in ("up-0", "up-1", "up-2"):
        wait_for(f"the rows on {pod}", lambda: rows(cluster, namespace, pod) == ROW_FACTS, timeout=60)
    # ANALYZE ran: pg_upgrade carries no statistics over.
    assert sql(cluster, namespace, "up-0", "select count(*) from pg_stats where tablename = 'kept'") != "0"
    write_rows(cluster, namespace, "up-0", 101, 110)  # and it takes writes
    told = status(cluster, namespace, "up")["upgrade"]
    assert (told["fromVersion"], told["toVersion"], told["primary"]) == ("15.2", version, "up-0"), told
    # Every pod stopped cleanly through its preStop hook, none of which was cut short by its server's exit.
    hooks = get_json(cluster, "-n", namespace, "events", "--field-selector", "reason=FailedPreStopHook")
    assert hooks.get("items") == [], [e["message"] for e in hooks["items"]]
    assert len(events(cluster, namespace, "up", "MajorUpgradeStarted")) == 1
    wait_for("one MajorUpgradeSucceeded Event", lambda: len(events(cluster, namespace, "up", "MajorUpgradeSucceeded"))
             == 1, timeout=15)  # posted after the status write that the test has seen

    # The 15 archive is kept apart and listed; 17's starts with a base backup of its own.
    backup = wait_for("a 17 base backup", lambda: (lambda b: b if b.get("lastBaseBackup") else None)(
        status(cluster, namespace, "up").get("backup") or {}), timeout=180)
    [earlier] = backup["earlierMajors"]
    assert (earlier["major"], earlier["directory"], earlier["baseBackups"]) == (15, "postgresql-15", [first_15])
    assert backup["lastBaseBackup"] > earlier["until"] and backup["firstBackupJob"] == "up-backup-first-17"
    volume = cluster.kubectl("exec", "-n", namespace, "up-wal-0", "--", "sh", "-c",
                             "cat /backups/PG_MAJOR /backups/postgresql-15/PG_MAJOR; ls /backups/base/*/data/PG_VERSION"
                             " /backups/postgresql-15/base/*/data/PG_VERSION | wc -l").stdout.split()
    assert volume == ["17", "15", "2"], volume
    create_db(cluster, namespace, "old", replicas=1, restore={"fromDatabase": "up", "backup": "latest"})
    wait_for("old Ready on 15", lambda: status(cluster, namespace, "old").get("ready") is True, timeout=300)
    assert sql(cluster, namespace, "old-0", "show server_version").startswith("15.")
    assert rows(cluster, namespace, "old-0") == ROW_FACTS  # every row up had on 15; 101-110 are 17's

    wait_for("stuck failed", lambda: upgrade_phase(cluster, namespace, "stuck") == "Failed", timeout=300)
    failed = status(cluster, namespace, "stuck")["upgrade"]
    assert "pg_upgrade --check" in failed["message"] and "reg* data types" in failed["message"], failed
    assert "public.refs.f" in failed["message"], failed
    wait_for("stuck Ready on 15 again", lambda: status(cluster, namespace, "stuck").get("ready") is True, timeout=300)
    assert get_json(cluster, "-n", namespace, "pod", "stuck-0")["spec"]["containers"][0]["image"].endswith(":15.2")
    assert sql(cluster, namespace, "stuck-0", "show server_version").startswith("15.")
    assert rows(cluster, namespace, "stuck-0") == ROW_FACTS
    [warning] = events(cluster, namespace, "stuck", "MajorUpgradeFailed")
    assert warning["type"] == "Warning" and "reg* data types" in warning["message"]
    assert events(cluster, namespace, "stuck", "BackupFailed") == []  # the Job is no backup

    back = cluster.kubectl("patch", "-n", namespace, "mydb/up", "--type=merge",
                           "-p", '{"spec": {"version": "15.2"}}', check=False)
    assert back.returncode != 0 and "cannot go back a major" in back.stderr, back.stderr
    # A failed upgrade left the data of 15: going back to 15 is admitted (status.upgrade says so), and nothing moves.
    uid = pod_uid(cluster, namespace, "stuck-0")
    cluster.kubectl("patch", "-n", namespace, "mydb/stuck", "--type=merge", "-p", '{"spec": {"version": "15.2"}}')
    wait_for("stuck Ready at 15.2", lambda: (lambda s: s.get("ready") is True and s.get("observedGeneration") ==
             get_json(cluster, "-n", namespace, "mydb", "stuck")["metadata"]["generation"])(
        status(cluster, namespace, "stuck")), timeout=60)
    assert pod_uid(cluster, namespace, "stuck-0") == uid and rows(cluster, namespace, "stuck-0") == ROW_FACTS


def test_a_major_the_platform_does_not_offer_is_refused_with_the_database_serving_throughout(
        cluster, real_operator, namespace):
    """The issue's case: one pod at 15.2, then spec.version 16.4 on a platform with images for 15 and 17 only (the
    real node's: examples/platform-local-node.yaml). Refused in status before any pod stops (phase Failed, reason
    MajorUpgradeRefused, one Warning, no MajorUpgradeStarted), the same pod serving its rows all along (before,
    every pod stopped and stayed down). Going back to 15.2 is admitted, since status.upgrade says nothing was
    touched, and clears the refusal."""
    name, pod = "unoffered", "unoffered-0"
    create_db(cluster, namespace, name, replicas=1)
    wait_for(f"mydb/{name} Ready", lambda: status(cluster, namespace, name).get("ready") is True, timeout=300)
    write_rows(cluster, namespace, pod)
    uid = pod_uid(cluster, namespace, pod)

    def serving() -> bool:
        """The same pod, Ready, and the StatefulSet still asking for it."""
        found = get_json(cluster, "-n", namespace, "pod", pod)
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in (found.get("status") or {}).get("conditions") or [])
        wanted = (get_json(cluster, "-n", namespace, "statefulset", name).get("spec") or {}).get("replicas")
        return pod_uid(cluster, namespace, pod) == uid and ready and wanted == 1

    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"version": "16.4"}}')
    words = "PostgreSQL 16 is not offered by this platform, which has images for 15, 17"

    def refused() -> dict | None:
        assert serving(), "the pod stopped, or the StatefulSet was scaled down"
        told = status(cluster, namespace, name)
        return told if (told.get("upgrade") or {}).get("phase") == "Refused" else None

    told = wait_for("the upgrade refused in status", refused, timeout=120, interval=0.5)
    upgrade = told["upgrade"]
    assert (upgrade["fromVersion"], upgrade["toVersion"]) == ("15.2", "16.4"), upgrade
    assert "refused before any pod stopped" in upgrade["message"] and words in upgrade["message"], upgrade
    ready = next(c for c in told["conditions"] if c["type"] == "Ready")
    degraded = next(c for c in told["conditions"] if c["type"] == "Degraded")
    assert (told["phase"], ready["reason"], degraded["status"]) == ("Failed", "MajorUpgradeRefused", "True"), told
    assert rows(cluster, namespace, pod) == ROW_FACTS
    # A while on: still the same pod serving, one Warning, no start.
    until = time.monotonic() + 20
    while time.monotonic() < until:
        assert serving(), "the pod stopped, or the StatefulSet was scaled down"
        time.sleep(1)
    [warning] = events(cluster, namespace, name, "MajorUpgradeRefused")
    assert warning["type"] == "Warning" and words in warning["message"], warning
    assert events(cluster, namespace, name, "MajorUpgradeStarted") == []
    assert get_json(cluster, "-n", namespace, "jobs", "-l", "app.kubernetes.io/component=major-upgrade",
                    ).get("items") == []

    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"version": "15.2"}}')
    wait_for("the refusal gone, Ready again", lambda: (lambda s: s.get("ready") is True and "upgrade" not in s)(
        status(cluster, namespace, name)), timeout=60)
    assert serving() and rows(cluster, namespace, pod) == ROW_FACTS
