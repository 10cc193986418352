"""--log-format json writes one JSON object per line; kopf's per-event chatter stays out."""

import json
import logging

from mydb_operator.telemetry import logs


def test_json_lines(capsys):
    logs.configure("json")
    logging.getLogger("mydb_operator.reconcile").info("ns/db: helm revision %d applied", 3)
    logging.getLogger("kopf.objects").info("Handler 'watch-pods' succeeded.")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["message"] == "ns/db: helm revision 3 applied"
    assert (entry["level"], entry["logger"]) == ("INFO", "mydb_operator.reconcile")
    logs.configure("text")
