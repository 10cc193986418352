"""The `helm test` pod's command (scripts/test-connection.sh) as the rendered Pod runs it, against the
session's primary (the read-write Service) and replica (the read-only one). `render` leaves hooks out (as
`helm upgrade` does), so the test pod comes from `helm template` of the operator's values."""

from __future__ import annotations

import asyncio
import copy

import pytest
import yaml

from mydb_operator.instances import commands
from mydb_operator.instances.connection import Login, Server

from .harness import EXAMPLE, Container, find_helm, loopback_certificates, render_with



@pytest.fixture(scope="module")
def with_hooks(tmp_path_factory):
    return render_with(find_helm(), copy.deepcopy(yaml.safe_load(EXAMPLE.read_text())),
                       tmp_path_factory.mktemp("hooks"))


@pytest.fixture(scope="module")
def application(machine, primary):
    """The application's role and database on the primary, made by the operator's own statements
    (instances/commands.keep_owner) over its verify-full session, as the operator makes them."""
    login = Login(machine.secret["username"], machine.secret["password"], loopback_certificates()["ca.crt"].encode())
    server = Server(primary.name, primary.ip, machine.port, primary.ip, tls=True)
    app = machine.application
    done = asyncio.run(commands.keep_owner(server, login, app["username"], app["dbname"], app["password"]))
    assert done == ["role app created", "database app created, owned by app"] or done == [], done
    assert asyncio.run(commands.keep_owner(server, login, app["username"], app["dbname"], app["password"])) == []
    return app


def helm_test_pod(machine, rendered, **env: str):
    pod = rendered.get("Pod", f"{rendered.statefulset()['metadata']['name']}-test")
    home = machine.mkdir(machine.root / "helm-test")
    container = Container(machine, rendered, pod["spec"], "test", pod_name=pod["metadata"]["name"],
                          pod_ip=None, home=home, volume_dirs={})
    return machine.run(container.command, {**container.env, **env}, cwd=home)


def test_helm_test_writes_reads_and_finds_a_replica(machine, with_hooks, primary, replica, application):
    """As the application's role, in its database: a row through the read-write Service, read back there and
    through the read-only Service from a replica; the table is gone afterwards. Its pod mounts the
    application's Secret only, never the superuser's."""
    pod = with_hooks.get("Pod", f"{with_hooks.statefulset()['metadata']['name']}-test")
    [credentials] = [v for v in pod["spec"]["volumes"] if v["name"] == "credentials"]
    assert credentials["secret"]["secretName"].endswith("-app"), credentials
    result = helm_test_pod(machine, with_hooks)
    assert result.returncode == 0, result.stdout + result.stderr
    # The Services' names, localized: 127.0.0.1 is the primary, 127.0.0.2 the replica.
    assert "through 127.0.0.1 (the primary)" in result.stdout
    assert "through 127.0.0.2 (a replica)" in result.stdout
    assert primary.sql("SELECT to_regclass('mydatabase_helm_test') IS NULL", db="app") == "t"
    assert primary.sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'") == "0"


def test_helm_test_fails_when_the_read_only_service_reaches_the_primary(machine, with_hooks, primary, replica,
                                                                        application):
    """A read-only Service that lands on the primary is a failure, named."""
    result = helm_test_pod(machine, with_hooks, RO_HOST="127.0.0.1")
    assert result.returncode != 0
    assert "127.0.0.1 is not a replica" in result.stderr, result.stderr
