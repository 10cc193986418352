"""The operator's one query to each server (instances/probe.FACTS) against a real PostgreSQL: it runs as the
database's superuser, and it lists the data kept aside on the pod's volume (entrypoint.sh: diverged-*) with its
mydb-kept.txt, which the operator reports in status and a Warning."""

from __future__ import annotations

import json
import shutil

from mydb_operator.instances.probe import FACTS
from mydb_operator.model.instances import kept_facts


def test_the_facts_query_answers_on_a_primary_and_lists_the_kept_data_beside_pgdata(primary, replica):
    kept = primary.pgdata.parent / "diverged-20261207T120000Z"
    other = primary.pgdata.parent / "not-kept"
    kept.mkdir()
    other.mkdir()
    (kept / "mydb-kept.txt").write_text("reason=rewind-failed\ntimeline=3\ncheckpoint=0/6000150\ndivergedAt=\n")
    try:
        sql = FACTS.replace("$1", "'mydb_archive'")
        query = f"select row_to_json(facts) from ({sql}) facts"
        answered = primary.machine.psql(primary.ip, query)
        assert answered.returncode == 0, answered.stderr
        row = json.loads(answered.stdout)
        assert row["in_recovery"] is False and row["wal_lsn"] > 0
        assert [entry["dir"] for entry in row["kept"]] == ["diverged-20261207T120000Z"]
        assert kept_facts(row["kept"][0]["info"]) == {"reason": "rewind-failed", "timeline": "3",
                                                      "checkpoint": "0/6000150"}
        on_replica = json.loads(replica.machine.psql(replica.ip, query).stdout)
        assert on_replica["in_recovery"] is True and on_replica["kept"] == []
    finally:
        shutil.rmtree(kept)
        shutil.rmtree(other)
