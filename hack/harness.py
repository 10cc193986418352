"""What every part of the local cluster shares: its folders, ports and address
ranges, a log line, the PKI, and starting, finding and stopping its processes.

Only the standard library is used so that this runs before any venv exists.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

HACK_DIR = Path(__file__).resolve().parent
REPO_DIR = HACK_DIR.parent
# Absolute: the kubelet's config names files under it, and resolves a relative path from its own folder.
CLUSTER_DIR = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO_DIR / ".cluster")).absolute()
STATE_DIR = CLUSTER_DIR / "state"  # removed by `down`
LOG_DIR = CLUSTER_DIR / "logs"  # kept by `down`, for debugging
PKI_DIR = STATE_DIR / "pki"
PID_DIR = STATE_DIR / "pids"
ADMIN_KUBECONFIG = CLUSTER_DIR / "admin.kubeconfig"
CACHE_DIR = Path(os.environ.get("MYDB_CACHE", Path.home() / ".cache" / "mydb-operator"))

# All ports hang off one base so that a second cluster (the test of `down`)
# can run beside the first with another MYDB_CLUSTER_DIR and base.
PORT_BASE = int(os.environ.get("MYDB_CLUSTER_PORT_BASE", "16400"))

# Every pod and Service address comes from 198.18.0.0/15, a range reserved
# for benchmarking and never routed publicly; the host gets an unreachable
# route for all of it, so an address nobody programmed fails here.
SAFE_RANGE = "198.18.0.0/15"
POD_CIDR = "198.18.0.0/16"  # every pod, simulated or real
KWOK_POD_CIDR = "198.18.0.0/17"  # addresses kwok hands its simulated pods
SERVICE_CIDR = "198.19.0.0/16"  # room for hundreds of databases' Services
SERVICE_FIRST_IP = "198.19.0.1"  # the `kubernetes` Service

START = time.monotonic()


def log(message: str) -> None:
    print(f"[cluster {time.monotonic() - START:5.1f}s] {message}", file=sys.stderr, flush=True)


def run(*args: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A command whose failure is reported with its own words."""
    result = subprocess.run(args, text=True, capture_output=True, **kwargs)
    if check and result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {(result.stderr or result.stdout).strip()}")
    return result


# --------------------------------------------------------------------- PKI


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_key(path: Path) -> None:
    """An ECDSA P-256 key (as kubeadm's ECDSA-P256): a 2048-bit RSA key took 0.25 s of CPU to make here, this
    takes 5 ms; and every TLS handshake with the API server and every ServiceAccount token signs with one."""
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def user_cluster_role(user: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A ClusterRole of RULES bound to USER (a client certificate's CN), as one List for `kubectl apply`."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": user},
                "rules": rules,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": user},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        ],
    }


def make_cert(name: str, subject: str, *, server_sans: str | None = None) -> None:
    """Write PKI_DIR/name.{key,crt}, signed by the local CA, unless a kept state already has them
    (a stopped cluster resumes with the identities its objects and kubeconfigs know)."""
    key, csr, crt = (PKI_DIR / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
    if key.exists() and crt.exists():
        return
    make_key(key)
    openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext = PKI_DIR / f"{name}.ext"
    usage = "serverAuth" if server_sans else "clientAuth"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment", f"extendedKeyUsage={usage}"]
    if server_sans:
        lines.append(f"subjectAltName={server_sans}")
    ext.write_text("\n".join(lines) + "\n")
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(PKI_DIR / "ca.crt"),
        "-CAkey",
        str(PKI_DIR / "ca.key"),
        "-CAcreateserial",
        "-days",
        "3650",
        "-sha256",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )


# --------------------------------------------------------------- processes


def pid_file(name: str, pid_dir: Path = PID_DIR) -> Path:
    return pid_dir / f"{name}.pid"


def running_pid(name: str, pid_dir: Path = PID_DIR) -> int | None:
    """The pid of component `name` if it is alive and is really that program (pids get reused).

    A program is recognised by its executable's name, or, for a script, by
    the component name appearing in its arguments (mydb_operator.cli,
    volume_agent.py, registry-nodes.yaml). A real node's copy carries the node's number
    (kubelet-2 runs kubelet)."""
    try:
        pid = int(pid_file(name, pid_dir).read_text())
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    program = re.sub(r"-\d+$", "", name)
    script = program.replace("-", "_")
    ours = Path(args[0]).name == program or any(script in arg or name in arg for arg in args[1:3])
    return pid if ours else None


# The components this process started: how one that ended ended (a silent death says it was a signal).
STARTED: dict[str, subprocess.Popen[bytes]] = {}


def start(name: str, args: list[str], env: dict[str, str] | None = None) -> None:
    # The child has its own copy of the log's descriptor: ours closes once it is started.
    with open(LOG_DIR / f"{name}.log", "ab") as log_file:
        process = subprocess.Popen(
            args,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    pid_file(name).write_text(str(process.pid))
    STARTED[name] = process
    log(f"started {name} (pid {process.pid}, log {LOG_DIR / (name + '.log')})")


def alive(name: str) -> bool:
    """Whether component NAME runs. One this process started is asked directly: just after exec its
    /proc/PID/cmdline can still be empty (the parent is released before the kernel sets the arguments),
    which running_pid would take for a reused pid."""
    process = STARTED.get(name)
    if process is not None:
        return process.poll() is None
    return running_pid(name) is not None


def how_it_ended(name: str) -> str:
    """`exit status N` or `killed by SIGNAME` for a component this process started and that ended."""
    process = STARTED.get(name)
    code = process.poll() if process is not None else None
    if code is None:
        return "ended"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def stop(name: str) -> None:
    pid = running_pid(name)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if running_pid(name) is None or not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    log(f"stopped {name} (pid {pid})")


def http_ok(url: str, *, client_cert: bool = False, timeout: float = 2.0) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if client_cert:
        context.load_cert_chain(PKI_DIR / "admin.crt", PKI_DIR / "admin.key")
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            status: int = response.status
            return status == 200
    except OSError:
        return False


def wait_until(what: str, check: Callable[[], bool], timeout: float = 120.0, process: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            log(f"{what} is ready")
            return
        if process and not alive(process):
            ended = how_it_ended(process)
            raise SystemExit(f"{process} exited while starting ({ended}); see {LOG_DIR / (process + '.log')}")
        time.sleep(0.2)
    raise SystemExit(f"{what} not ready after {timeout:.0f}s; see the logs in {LOG_DIR}")
