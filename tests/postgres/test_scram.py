"""The operator's SCRAM-SHA-256 verifiers (model/scram.py) against a real PostgreSQL: a verifier it computed logs
the role in with the password, and it recognises the verifiers PostgreSQL computes itself, non-ASCII passwords
(SASLprep) included."""

from __future__ import annotations

import secrets

import pytest

from mydb_operator.model.scram import verifier, verifies


# Fixed ids: pytest-xdist's workers must collect the same tests (a random one differs between them).
@pytest.mark.parametrize("password", ["random", "pässwörd\u00a0Ⅸ", "it's \\ odd"])
def test_a_verifier_computed_here_logs_in_and_one_postgresql_computed_is_recognised(primary, password):
    password = "s3cret-" + secrets.token_urlsafe(8) if password == "random" else password
    role = "scram_" + secrets.token_hex(4)
    quoted = password.replace("'", "''")
    primary.sql(f"CREATE ROLE {role} LOGIN PASSWORD '{verifier(password)}'")
    try:
        env = {"PATH": primary.machine.path, "PGPASSWORD": password}
        login = primary.machine.run(["psql", "-XAtq", "-h", primary.ip, "-p", str(primary.machine.port), "-U", role,
                                     "-d", "postgres", "-c", "select current_user"], env)
        assert login.returncode == 0 and login.stdout.strip() == role, login.stderr
        wrong = primary.machine.run(["psql", "-XAtq", "-h", primary.ip, "-p", str(primary.machine.port), "-U", role,
                                     "-d", "postgres", "-c", "select 1"], {**env, "PGPASSWORD": password + "x"})
        assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr
        primary.sql(f"SET password_encryption = 'scram-sha-256'; ALTER ROLE {role} PASSWORD '{quoted}'")
        stored = primary.sql(f"SELECT rolpassword FROM pg_authid WHERE rolname = '{role}'")
        assert stored.startswith("SCRAM-SHA-256$4096:")
        assert verifies(stored, password) and not verifies(stored, password + "x")
    finally:
        primary.sql(f"DROP ROLE {role}")


def test_what_is_no_scram_verifier_verifies_nothing():
    assert not verifies(None, "pw") and not verifies("", "pw") and not verifies("md5" + "0" * 32, "pw")
    assert not verifies("pw", "pw")
