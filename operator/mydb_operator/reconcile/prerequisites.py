"""What must hold before Helm runs: the StorageClass and restore source exist, the credentials Secret is there."""

from __future__ import annotations

from .. import names
from ..cluster.api import ApiPort
from ..desired.credentials import credentials_secret, credentials_update, missing_keys
from ..desired.values import tls_secret_name
from ..model.observation import Observation
from ..model.secrets import made_by_the_operator, name_taken_message, secret_files, taken
from ..model.spec import DatabaseSpec
from ..status.problem import Problem


async def missing_prerequisite(
    api: ApiPort, namespace: str, spec: DatabaseSpec, observed: Observation, first_install: bool
) -> Problem | None:
    """What Helm would not notice but the pods would: a missing StorageClass or restore source."""
    if spec.storage_class_name and not observed.claims and await api.storage_class(spec.storage_class_name) is None:
        # Helm would succeed and leave every pod Pending on an unbindable claim.
        return Problem(
            "StorageClassNotFound", f"spec.storageClassName: StorageClass {spec.storage_class_name} does not exist"
        )
    source = names.backups_claim_name(spec.restore.from_database) if spec.restore else None
    if source and first_install and not await api.claim_exists(namespace, source):
        return Problem(
            "RestoreSourceMissing", f"spec.restore.fromDatabase: no backups volume {source} in namespace {namespace}"
        )
    return None


async def ensure_credentials(
    api: ApiPort, namespace: str, name: str, spec: DatabaseSpec, first_install: bool, port: int = names.POSTGRES_PORT
) -> tuple[str | None, Problem | None]:
    """Create the operator's Secret before the first install, or check the user's; (what was created, problem).
    `port`: the servers', which the Secret's URIs name."""
    if spec.existing_secret:
        secret = await api.read_secret(namespace, spec.existing_secret)
        if secret is None:
            return None, Problem(
                "CredentialsMissing",
                f"spec.credentials.secretName: Secret {spec.existing_secret} does not exist in namespace {namespace}",
            )
        missing = missing_keys(secret)
        if missing:
            return None, Problem(
                "CredentialsInvalid",
                f"spec.credentials.secretName: Secret {spec.existing_secret} lacks the keys {', '.join(missing)}",
            )
        return None, None
    if not first_install:  # made before the first install; never rotated, never re-made silently
        return None, None
    ca = b""
    if spec.tls:  # made before Helm runs, so before this (reconcile/certificates.py)
        ca = secret_files(await api.read_secret(namespace, tls_secret_name(name, spec))).get("ca.crt", b"")
    body = credentials_secret(namespace, name, port, ca)
    if await api.create_secret_once(body):
        return f"created Secret {body['metadata']['name']} with random passwords", None
    secret_name = body["metadata"]["name"]
    if taken({secret_name: await api.read_secret(namespace, secret_name)}, name):
        return None, Problem("SecretNameTaken", name_taken_message(namespace, [secret_name]))
    return None, None


async def refresh_credentials(api: ApiPort, namespace: str, name: str, ca: bytes) -> bool:
    """The operator's credentials Secret follows the servers (desired/credentials.credentials_update): a Secret
    made before TLS, or before a new CA (renewed, or the user's certificate), gets it as `ca.crt`; with TLS
    off, plain URIs. False when there is no Secret of the operator's (not made yet, or the user's)."""
    secret_name = names.credentials_secret_name(name)
    secret = await api.read_secret(namespace, secret_name)
    if secret is None or not made_by_the_operator(secret, name):
        return False
    changes = credentials_update(secret_files(secret), ca)
    if changes:
        await api.update_secret_data(secret, changes)
    return True
