"""What a deletion removes, and whether the garbage collector removes the release's objects."""

from fake_api import FakeApi, run

from mydb_operator import names
from mydb_operator.handlers.deletion import delete_own_secret
from mydb_operator.policy.deletion import deletion_plan, owned_by

SPEC = {"replicas": 1, "version": "15.2", "storage": "1Gi"}
UID = "5b0e1f7c-4f55-4a8e-9a53-0d2c2f7c1a11"


def statefulset(*owner_uids: str) -> dict:
    return {"metadata": {"name": "db", "ownerReferences": [
        {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "name": "db", "uid": uid} for uid in owner_uids]}}


def test_retain_keeps_claims_and_secret():
    plan = deletion_plan(SPEC)
    assert (plan.delete_claims, plan.delete_secret) == (False, False)


def test_delete_removes_claims_and_the_operators_secret_but_never_the_users():
    assert deletion_plan({**SPEC, "deletionPolicy": "Delete"}).delete_secret is True
    own = deletion_plan({**SPEC, "deletionPolicy": "Delete", "credentials": {"secretName": "mine"}})
    assert (own.delete_claims, own.delete_secret) == (True, False)


def test_a_spec_that_cannot_be_parsed_keeps_everything():
    plan = deletion_plan({**SPEC, "deletionPolicy": "Delete", "storage": "lots"})
    assert (plan.delete_claims, plan.delete_secret) == (False, False)


def test_objects_owned_by_this_database_are_left_to_the_garbage_collector():
    assert owned_by(statefulset(UID), UID)
    assert owned_by(statefulset("another", UID), UID)


def test_an_older_release_or_another_owner_needs_helm_uninstall():
    assert not owned_by(statefulset(), UID)  # made by a chart before ownerReferences
    assert not owned_by({"metadata": {"name": "db"}}, UID)
    assert not owned_by(statefulset("a-database-of-the-same-name-deleted-before"), UID)
    assert not owned_by(None, UID)  # no StatefulSet seen: uninstall whatever Helm recorded
    assert not owned_by(statefulset(UID), "")


def test_only_the_operators_own_secrets_are_deleted_with_the_database():
    """deletionPolicy Delete removes the database's Secrets that carry the operator's labels for it; a Secret of
    the same name that someone else made (another app's `db-tls`) stays."""
    api = FakeApi()
    ours = {"metadata": {"name": "db-ca", "uid": "u1", "labels": {names.MANAGED_BY_LABEL: names.OPERATOR_NAME,
                                                                   names.INSTANCE_LABEL: "db"}}}
    foreign = {"metadata": {"name": "db-tls", "uid": "u2", "labels": {"app": "web"}}}
    api.secrets = {("ns", "db-ca"): ours, ("ns", "db-tls"): foreign}
    for secret in ("db-ca", "db-tls", "db-credentials"):
        run(delete_own_secret(api, "ns", "db", secret))
    assert api.secrets == {("ns", "db-tls"): foreign}
