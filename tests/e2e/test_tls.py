"""Encrypted and isolated connections on real pods: the NetworkPolicy enforced, TLS by default, plain TCP
refused, rotation, the user's certificate.

One database of two pods goes through it all, in order: who may connect at
all, what every client sees by default, a rotation while a client holds a
session, then a certificate the user supplies (cert-manager's Secret layout)
in place of the operator's."""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import struct

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from . import sharing
from .conftest import wait_ready
from .realnode import images, on_real_node
from .test_real_postgres import create_db, sql, wait_streaming, write_rows
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
NAME = "secured"
CLIENT = "tls-client"
SSL_REQUEST = struct.pack("!ii", 8, 80877103)  # PostgreSQL's SSLRequest: the server answers S, then TLS starts


def presented_certificate(address: str, port: int = 5432) -> x509.Certificate:
    """The certificate the server at ADDRESS presents to a new connection (from this host, as the operator
    connects): SSLRequest, then a TLS handshake that verifies nothing, so any certificate is seen."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((address, port), timeout=5) as raw:
        raw.sendall(SSL_REQUEST)
        assert raw.recv(1) == b"S", f"{address} does not offer TLS"
        with context.wrap_socket(raw) as secured:
            der = secured.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def secret_certificate(cluster, namespace: str, secret: str) -> x509.Certificate:
    data = get_json(cluster, "-n", namespace, "secret", secret)["data"]
    return x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))


def pod_ips(cluster, namespace: str) -> dict[str, str]:
    pods = get_json(cluster, "-n", namespace, "pods", "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    return {p["metadata"]["name"]: p["status"].get("podIP", "") for p in pods
            if p["metadata"]["name"] in (f"{NAME}-0", f"{NAME}-1")}


def every_server_presents(cluster, namespace: str, serial: int) -> bool:
    ips = pod_ips(cluster, namespace)
    try:
        return len(ips) == 2 and all(presented_certificate(ip).serial_number == serial for ip in ips.values())
    except OSError:
        return False


def tls_status(cluster, namespace: str) -> dict:
    return (get_json(cluster, "-n", namespace, "mydb", NAME).get("status") or {}).get("tls") or {}


def start_client(cluster, namespace: str, pod: str = CLIENT, labels: dict | None = None) -> None:
    """A pod with psql and the credentials Secret (its URIs and ca.crt) mounted, as an application would; by
    default labelled as the database's NetworkPolicy admits its clients."""
    credentials = [{"name": "credentials", "secret": {"secretName": f"{NAME}-credentials", "optional": True}}]
    spec = on_real_node({
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999},
        "containers": [{
            "name": "client", "image": images()["POSTGRES_IMAGE"], "command": ["sleep", "3600"],
            "volumeMounts": [{"name": "credentials", "mountPath": "/credentials", "readOnly": True}],
        }],
        "volumes": credentials,
    })
    labels = {f"{NAME}-client": "true"} if labels is None else labels
    body = {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {"name": pod, "labels": labels}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def ready(cluster, namespace: str, pod: str) -> None:
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", f"pod/{pod}", "--timeout=120s")


def ping(cluster, namespace: str, pod: str, host: str) -> int:
    """pg_isready from POD to HOST's PostgreSQL port, 3 s at most: 0 the server accepts connections, 1 it answered
    but rejects them (the connection got through), 2 no response (a dropped SYN times out), 3 no attempt."""
    return cluster.kubectl("exec", "-n", namespace, pod, "--", "pg_isready", "-h", host, "-p", "5432", "-t", "3",
                           check=False).returncode


def connects(cluster, namespace: str, pod: str, host: str) -> bool:
    return ping(cluster, namespace, pod, host) == 0


def blocked(cluster, namespace: str, pod: str, host: str) -> bool:
    """No connection at all: a server that answered, even to reject, would mean the packets got through."""
    return ping(cluster, namespace, pod, host) == 2


def client(cluster, namespace: str, script: str, check: bool = True):
    """SCRIPT (sh) in the client pod: $URI and $URI_RO are the Secret's URIs, PGSSLROOTCERT its CA."""
    line = ('export PGSSLROOTCERT=/credentials/ca.crt URI="$(cat /credentials/uri)" '
            'URI_RO="$(cat /credentials/uri-ro)"; ' + script)
    return cluster.kubectl("exec", "-n", namespace, CLIENT, "--", "sh", "-c", line, check=check)


ENCRYPTED = "select ssl from pg_stat_ssl where pid = pg_backend_pid()"


def user_certificate(namespace: str) -> dict[str, str]:
    """What a platform's cert-manager would put in a Secret: its own CA, and a server certificate signed by it
    for the Services and the pods."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "platform issuer")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA384()))
    hosts = [NAME, f"{NAME}-ro", f"{NAME}.{namespace}.svc", f"{NAME}-ro.{namespace}.svc",
             f"*.{NAME}-headless.{namespace}.svc"]
    server = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)]))
              .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=20))
              .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
              .sign(ca_key, hashes.SHA384()))
    pem = serialization.Encoding.PEM
    return {
        "tls.crt": server.public_bytes(pem).decode(),
        "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),
        "ca.crt": ca.public_bytes(pem).decode(),
    }


@pytest.mark.long
def test_tls_by_default_isolation_rotation_under_a_session_and_a_users_certificate(cluster, real_operator,
                                                                                     namespace):
    create_db(cluster, namespace, NAME, replicas=2)
    start_client(cluster, namespace)
    start_client(cluster, namespace, "unlisted", labels={})
    outsiders = sharing.create_namespace(cluster, "outsiders")
    try:
        start_client(cluster, outsiders, "outsider")
        for where, pod in ((namespace, CLIENT), (namespace, "unlisted"), (outsiders, "outsider")):
            ready(cluster, where, pod)
        wait_ready(cluster, namespace, NAME, timeout=300)
        isolated(cluster, namespace, outsiders)
    finally:
        cluster.kubectl("delete", "namespace", outsiders, "--wait=false", check=False)
    encrypted_rotated_and_replaced(cluster, namespace)


def isolated(cluster, namespace: str, outsiders: str) -> None:
    """The chart's NetworkPolicy, enforced on the real node (kube-router): the labelled client reaches the
    database, by the pod's address and through the Service; an unlabelled pod of the same namespace and a pod
    of another one (labelled, even) do not, at the same moment."""
    primary = get_json(cluster, "-n", namespace, "pod", f"{NAME}-0")["status"]["podIP"]
    service = f"{NAME}.{namespace}.svc"
    for host in (primary, service):
        wait_for(f"the client reaching {host}", lambda h=host: connects(cluster, namespace, CLIENT, h), timeout=30)
        assert blocked(cluster, namespace, "unlisted", host), f"an unlisted pod reached {host}"
        assert blocked(cluster, outsiders, "outsider", host), f"a pod of {outsiders} reached {host}"
        assert connects(cluster, namespace, CLIENT, host), f"the client no longer reaches {host}"


def encrypted_rotated_and_replaced(cluster, namespace: str) -> None:
    wait_streaming(cluster, namespace, f"{NAME}-0", 1)
    write_rows(cluster, namespace, f"{NAME}-0")

    # --- By default: the operator's CA and certificate, verify-full through both Services, plain TCP refused.
    issued = secret_certificate(cluster, namespace, f"{NAME}-tls")
    wait_for("both servers presenting the operator's certificate",
             lambda: every_server_presents(cluster, namespace, issued.serial_number), timeout=30)
    status = wait_for("status.tls presented by both", lambda: (s := tls_status(cluster, namespace))
                      and s.get("presentedBy") == [f"{NAME}-0", f"{NAME}-1"] and s, timeout=60)
    assert status["issuer"] == "operator" and status["secretName"] == f"{NAME}-tls", status
    assert status["notAfter"] == issued.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ"), status
    uri = client(cluster, namespace, 'echo "$URI"').stdout.strip()
    assert uri.endswith("?sslmode=verify-full") and f"@{NAME}.{namespace}.svc:5432/" in uri, uri
    through = client(cluster, namespace, f'psql "$URI" -XAtc "{ENCRYPTED}"; psql "$URI_RO" -XAtc '
                                         '"select pg_is_in_recovery()"')
    assert through.stdout.split() == ["t", "t"], through.stdout + through.stderr
    plain = client(cluster, namespace, 'psql "${URI%%\\?*}?sslmode=disable" -XAtc "select 1"', check=False)
    assert plain.returncode != 0 and "no encryption" in plain.stderr, plain.stderr
    # Every TCP connection to the primary is encrypted: the replica's and the operator's too.
    unencrypted = sql(cluster, namespace, f"{NAME}-0", "select count(*) from pg_stat_ssl join pg_stat_activity"
                      " using (pid) where client_addr is not null and not ssl")
    assert unencrypted == "0"
    assert sql(cluster, namespace, f"{NAME}-0", "select ssl from pg_stat_replication join pg_stat_ssl using (pid)"
               f" where application_name = '{NAME}-1'") == "t"

    # --- Rotation: a session held across it goes on, and a new connection verifies the new certificate.
    # In the background, its output to a file: the exec returns while the session stays open.
    hold = ('(echo "select 1;"; while [ ! -e /tmp/go ]; do sleep 0.2; done; '
            f'echo "select 40 + 2, ({ENCRYPTED});") | psql "$URI" -XAtq')
    client(cluster, namespace, f"cat > /tmp/hold.sh <<'EOF'\n{hold}\nEOF\n"
                               "sh /tmp/hold.sh > /tmp/held 2>&1 < /dev/null &")
    wait_for("the held session", lambda: client(cluster, namespace, "cat /tmp/held").stdout.strip() == "1")
    cluster.kubectl("annotate", "-n", namespace, f"mydb/{NAME}", "myapp.example.com/rotate-certificate=now")
    rotated = wait_for("a new certificate in the Secret", lambda: (c := secret_certificate(
        cluster, namespace, f"{NAME}-tls")).serial_number != issued.serial_number and c, timeout=60)
    # The kubelet rewrites a Secret's files at its next sync of the pod (every 10 s on the real node, a minute by
    # default); the operator then reloads each server.
    wait_for("both servers presenting the new certificate",
             lambda: every_server_presents(cluster, namespace, rotated.serial_number), timeout=180, interval=1)
    annotations = get_json(cluster, "-n", namespace, "mydb", NAME)["metadata"].get("annotations") or {}
    assert "myapp.example.com/rotate-certificate" not in annotations, annotations
    again = client(cluster, namespace, f'psql "$URI" -XAtc "{ENCRYPTED}"')
    assert again.stdout.strip() == "t", again.stderr
    client(cluster, namespace, "touch /tmp/go")
    wait_for("the held session's last answer", lambda: client(cluster, namespace, "cat /tmp/held").stdout.split()
             == ["1", "42|t"], timeout=30)
    renewed = [e for e in get_json(cluster, "-n", namespace, "events")["items"]
               if e.get("reason") == "CertificateRenewed" and e["involvedObject"]["name"] == NAME]
    assert len(renewed) == 1, renewed

    # --- The user's certificate (cert-manager's layout) in place of the operator's: one roll, verified by its CA.
    operators_ca = base64.b64decode(get_json(cluster, "-n", namespace, "secret", f"{NAME}-tls")["data"]["ca.crt"])
    files = user_certificate(namespace)
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "platform-cert"},
            "type": "kubernetes.io/tls", "stringData": files}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    cluster.kubectl("patch", "-n", namespace, f"mydb/{NAME}", "--type=merge",
                    "-p", json.dumps({"spec": {"tls": {"secretName": "platform-cert"}}}))
    users = x509.load_pem_x509_certificate(files["tls.crt"].encode())
    wait_for("both servers presenting the user's certificate",
             lambda: every_server_presents(cluster, namespace, users.serial_number), timeout=300, interval=1)
    wait_ready(cluster, namespace, NAME, timeout=180)
    status = wait_for("status.tls naming the user's Secret", lambda: (s := tls_status(cluster, namespace))
                      .get("secretName") == "platform-cert" and s, timeout=60)
    assert status["issuer"] == "user" and "caNotAfter" not in status, status
    primary = get_json(cluster, "-n", namespace, "mydb", NAME)["status"]["primary"]
    replica = ({f"{NAME}-0", f"{NAME}-1"} - {primary}).pop()
    wait_streaming(cluster, namespace, primary, 1)
    with_users_ca = client(cluster, namespace, "cat > /tmp/platform-ca.crt <<'EOF'\n" + files["ca.crt"] + "EOF\n"
                           f'PGSSLROOTCERT=/tmp/platform-ca.crt psql "$URI" -XAtc "{ENCRYPTED}"')
    assert with_users_ca.stdout.strip() == "t", with_users_ca.stderr
    old_ca = client(cluster, namespace, "cat > /tmp/operator-ca.crt <<'EOF'\n" + operators_ca.decode() + "EOF\n"
                    'PGSSLROOTCERT=/tmp/operator-ca.crt psql "$URI" -XAtc "select 1"', check=False)
    assert old_ca.returncode != 0 and "certificate verify failed" in old_ca.stderr, old_ca.stderr
    # The credentials Secret follows: its ca.crt is now the user's CA, so a client reading it verifies again.
    wait_for("the credentials Secret carrying the user's CA", lambda: base64.b64decode(get_json(
        cluster, "-n", namespace, "secret", f"{NAME}-credentials")["data"]["ca.crt"]).decode() == files["ca.crt"],
        timeout=60)
    assert sql(cluster, namespace, primary, "select ssl from pg_stat_replication join pg_stat_ssl using (pid)"
               f" where application_name = '{replica}'") == "t"
