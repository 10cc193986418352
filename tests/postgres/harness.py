"""Plays Kubernetes for the chart's scripts, on the machine's real PostgreSQL.

Nothing here is a copy of a script, a command or an environment variable
name: everything comes from `mydb-operator render` (or, for chart values the
operator does not set yet, `mydb-operator values` piped into `helm template`
of the same chart with `--set` on top). The script files are the
rendered ConfigMap's data; each process runs the rendered container command
with the rendered container env, where only what Kubernetes would supply is
filled in, and only what differs on one machine is moved:

- the credentials Secret -> test passwords, as the Secret volume's files
- the TLS Secret        -> a CA and a server certificate for the loopback
                           addresses the pods get (below), made once per run
                           as the operator makes them (desired/certificates.py),
                           owned by root and PostgreSQL's group when run as
                           root, as the kubelet writes a Secret's files
- fieldRef              -> the pod's name and namespace
- host names            -> loopback addresses: each database pod gets its own
                           (127.0.0.1 for ordinal 0, 127.0.0.2 for 1), so all
                           pods keep the same port, as in the cluster; a
                           replica's <primary>.PEER_DOMAIN becomes PRIMARY_HOST,
                           the address of the pod the record names
- the operator's record -> an optional ConfigMap the chart mounts but does not
                           render: one directory per database, shared by its
                           pods, that a test writes (DatabasePod.record)
- the PostgreSQL port   -> one free loopback port
- volume mount paths    -> directories under a temporary root (a claim that is
                           not the pod's own, such as another database's
                           backups, is a directory the test names)

Database pods get two settings the entrypoint documents for use outside
Kubernetes, because one machine has one network namespace and one /var/run:
LISTEN_ADDRESSES (the pod's own address instead of '*') and SOCKET_DIR (the
entrypoint's default socket directory, which is the pod's `run` mount, moved
like every other mount). PATH puts the PostgreSQL binaries first, as the image does.

As root (initdb refuses root), every process runs as the `postgres` OS user,
like the pod's runAsUser.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import ipaddress
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from e2e import waiting as polling  # tests/ is on sys.path (rootdir conftest)
from manifests import documents
from mydb_operator import cli
from mydb_operator.desired import certificates
from mydb_operator.desired.credentials import REPLICATION_USER, SUPERUSER

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "production-db.yaml"
NAMESPACE = "ns"
PG_TOOLS = ("postgres", "initdb", "pg_ctl", "psql", "pg_isready", "pg_basebackup",
            "pg_dump", "pg_restore", "pg_rewind", "pg_controldata")
STAMP_RE = re.compile(r"^\d{8}T\d{6}Z\.dump$")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """The e2e tests' poller, polling faster: a local server answers in milliseconds."""
    return polling.wait_for(what, check, timeout=timeout, interval=interval)


# --- rendering -------------------------------------------------------------

def find_helm() -> str | None:
    """MYDB_HELM, else the first ~/.cache/mydb-operator/bin/*/helm that is executable."""
    env = os.environ.get("MYDB_HELM")
    if env:
        return env if os.access(env, os.X_OK) else None
    candidates = sorted(Path.home().glob(".cache/mydb-operator/bin/*/helm"))
    return next((str(c) for c in candidates if os.access(c, os.X_OK)), None)


class Rendered:
    """The objects `mydb-operator render` printed, by (kind, name)."""

    def __init__(self, text: str):
        docs = documents(text)
        self.by_key = {(d["kind"], d["metadata"]["name"]): d for d in docs}

    def one(self, kind: str) -> dict:
        found = [d for (k, _), d in self.by_key.items() if k == kind]
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    def get(self, kind: str, name: str) -> dict:
        return self.by_key[(kind, name)]

    def statefulset(self, component: str = "database") -> dict:
        """The database's StatefulSet, or the archive's (component wal-archive)."""
        found = [d for (k, _), d in self.by_key.items()
                 if k == "StatefulSet" and d["metadata"]["labels"]["app.kubernetes.io/component"] == component]
        assert len(found) == 1, f"expected one {component} StatefulSet, rendered {len(found)}"
        return found[0]


def operator_cli(*args: str) -> str:
    """What the real CLI prints for `mydb-operator ARGS`, run in this process: its main() as the console
    script calls it, without a new interpreter's start (0.35 s of CPU) for each of the tier's renders."""
    printed, said = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
            cli.main(list(args))
    except SystemExit as exit:
        raise AssertionError(f"mydb-operator {' '.join(args)} failed: {exit.code}\n{said.getvalue()}") from None
    return printed.getvalue()


def render(helm: str, database: dict, workdir: Path) -> Rendered:
    """Runs the real CLI: mydb-operator render -f <database> --namespace ns."""
    path = workdir / f"{database['metadata']['name']}-{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(database))
    return Rendered(operator_cli("--helm", helm, "render", "-f", str(path), "--namespace", NAMESPACE))


def render_with(helm: str, database: dict, workdir: Path, *helm_args: str) -> Rendered:
    """`mydb-operator values -f <database>` piped into `helm template NAME charts/mydatabase
    -f - --namespace ns HELM_ARGS...`: the operator's values with chart values it does
    not pass yet (e.g. --set restore.enabled=true) on top."""
    path = workdir / f"{database['metadata']['name']}-{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(database))
    values = operator_cli("values", "-f", str(path))
    result = subprocess.run(
        [helm, "template", database["metadata"]["name"], str(REPO / "charts" / "mydatabase"),
         "--namespace", NAMESPACE, "-f", "-", *helm_args],
        input=values, capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return Rendered(result.stdout)


# --- the machine ------------------------------------------------------------

def free_port(addresses: tuple[str, ...]) -> int:
    """A TCP port free on every one of the loopback addresses, below the ephemeral range: a machine keeps
    its port while its servers stop and start, and a port of that range can meanwhile become some
    connection's own end (a run saw PostgreSQL's bind fail so, beside the e2e pass's loopback traffic)."""
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = secrets.choice(range(20000, max(ephemeral, 20001)))
        try:
            for address in addresses:
                with socket.socket() as probe:
                    probe.bind((address, port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on all of {addresses}")


@functools.cache
def loopback_certificates() -> dict[str, str]:
    """ca.crt, tls.crt and tls.key: the operator's CA, and a server certificate signed by it for the loopback
    addresses the pods and Services get here (verify-full compares an IP address host with the IP names)."""
    now = datetime.datetime.now(datetime.UTC)
    ca, ca_key = certificates.new_ca(NAMESPACE, "loopback", now)
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.load_pem_x509_certificate(ca)
    addresses = [x509.IPAddress(ipaddress.ip_address(f"127.0.0.{n}")) for n in range(1, 21)]
    server = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(issuer.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(addresses), critical=False)
        .sign(serialization.load_pem_private_key(ca_key, password=None), hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return {"ca.crt": ca.decode(), "tls.crt": server.public_bytes(serialization.Encoding.PEM).decode(),
            "tls.key": key_pem.decode()}


@dataclass
class Machine:
    """The temporary root, the OS user and the PostgreSQL binaries the tests run with."""

    pg_bin: Path
    root: Path
    user: str | None          # run as this OS user (None: the current user)
    port: int                 # stands in for the chart's PostgreSQL port
    secret: dict[str, str] = field(default_factory=lambda: {
        "username": SUPERUSER,
        "password": "pw-" + secrets.token_urlsafe(12),
        "replication-username": REPLICATION_USER,
        # A quote, a backslash and a space: every script must pass it through intact (psql, libpq's pgpass).
        "replication-password": "rp-" + secrets.token_urlsafe(12) + " it's \\ odd",
    })
    # The application's Secret (NAME-app) as the operator makes it; the role exists once a test makes it.
    application: dict[str, str] = field(default_factory=lambda: {
        "username": "app", "password": "ap-" + secrets.token_urlsafe(12) + ":odd\\", "dbname": "app",
    })

    @property
    def path(self) -> str:
        return f"{self.pg_bin}:/usr/local/bin:/usr/bin:/bin"

    def mkdir(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(path, self.user, self.user)
        return path

    def _as_user(self) -> dict:
        return {"user": self.user, "group": self.user, "extra_groups": []} if self.user else {}

    def run(self, argv: list[str], env: dict[str, str], timeout: float = 60,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or self.root, **self._as_user())

    def popen(self, argv: list[str], env: dict[str, str], log: Path,
              cwd: Path | None = None) -> subprocess.Popen:
        """Starts argv in the background, output to `log`."""
        with open(log, "ab") as out:
            # A session of its own: the process group can be ended as one.
            return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd or self.root,
                                    start_new_session=True, **self._as_user())

    def sibling(self, name: str) -> "Machine":
        """Another database on this machine: same binaries and OS user, its own root
        (under this one), port and credentials Secret."""
        return Machine(pg_bin=self.pg_bin, root=self.mkdir(self.root / name), user=self.user,
                       port=free_port(("127.0.0.1", "127.0.0.2")))

    def psql(self, host: str, sql: str, db: str = "postgres") -> subprocess.CompletedProcess:
        """Runs SQL over TCP as the chart's superuser (unaligned tuples out)."""
        env = {"PATH": self.path, "PGPASSWORD": self.secret["password"]}
        return self.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-h", host, "-p", str(self.port),
                         "-U", self.secret["username"], "-d", db, "-c", sql], env)


# The data directories, archives and backups of a run take a few hundred MB at most.
SCRATCH_NEEDS = 2 << 30


def scratch_parent(shm: str = "/dev/shm") -> str | None:
    """Where the run's files go: tmpfs when the machine has room for them, else the usual temporary
    folder. On tmpfs the fsyncs of initdb, pg_basebackup and checkpoints cost no CPU; these tests prove
    the scripts' logic, a disk's durability is the e2e tests' (real pods on XFS volumes)."""
    try:
        found = os.statvfs(shm)
    except OSError:
        return None
    runnable = not found.f_flag & (os.ST_NOEXEC | os.ST_RDONLY)  # the ConfigMap's scripts run from here
    return shm if runnable and found.f_bavail * found.f_frsize >= SCRATCH_NEEDS else None


def find_machine(major: str) -> tuple[Machine | None, str]:
    """The machine to test on (PostgreSQL `major`, Debian's layout), or None and why not."""
    bin_dir = Path(os.environ.get("MYDB_PG_BIN", f"/usr/lib/postgresql/{major}/bin"))
    missing = [t for t in PG_TOOLS if not os.access(bin_dir / t, os.X_OK)]
    if missing:
        return None, (f"PostgreSQL not found in {bin_dir} (missing {', '.join(missing)}); "
                      "run hack/install-postgres.sh or set MYDB_PG_BIN")
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no `postgres` OS user to run PostgreSQL as"
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="mydb-pg-", dir=scratch_parent()))
    machine = Machine(pg_bin=bin_dir, root=root, user=user,
                      port=free_port(("127.0.0.1", "127.0.0.2")))
    machine.mkdir(root)
    return machine, ""


# --- pods -------------------------------------------------------------------

class Container:
    """One rendered container made runnable here: its command and env, localized."""

    def __init__(self, machine: Machine, rendered: Rendered, pod_spec: dict, name: str,
                 pod_name: str, pod_ip: str | None, home: Path, volume_dirs: dict[str, Path]):
        self.machine = machine
        self.spec = next(c for c in pod_spec.get("initContainers", []) + pod_spec["containers"] if c["name"] == name)
        self.pod_name = pod_name
        self.pod_ip = pod_ip
        release = rendered.statefulset()["metadata"]["name"]
        self.chart_port = str(rendered.statefulset()["spec"]["template"]["spec"]
                              ["containers"][0]["ports"][0]["containerPort"])
        # Cluster DNS: the read-write Service leads to ordinal 0; "127.0.0.1" in
        # a probe is the pod itself.
        self.hosts = {
            release: "127.0.0.1",
            f"{release}-ro": "127.0.0.2",   # the read-only Service: the replica (ordinal 1)
        }
        if pod_ip:
            self.hosts["127.0.0.1"] = pod_ip
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        self.mounts: dict[str, Path] = {}
        self.scripts: Path | None = None    # where the ConfigMap volume is
        for mount in self.spec.get("volumeMounts", []):
            volume = volumes.get(mount["name"], {})
            if mount["name"] in volume_dirs:
                where = volume_dirs[mount["name"]]
            elif "configMap" in volume and volume["configMap"].get("optional"):
                # Not rendered: made by the operator. One directory per database, shared by its pods.
                where = machine.mkdir(machine.root / "configmaps" / volume["configMap"]["name"])
            elif "configMap" in volume:
                where = self.scripts = self._config_map(rendered, volume["configMap"],
                                                        home / mount["name"])
            elif "secret" in volume:
                where = self._secret(volume["secret"], home / mount["name"])
            else:   # an emptyDir, or a claim from volumeClaimTemplates
                where = machine.mkdir(home / mount["name"])
            self.mounts[mount["mountPath"]] = where
        lease = self.mounts.get("/var/run/mydb-lease")
        if lease is not None:
            # No API server here, so no primary lease: what the probe container's lease.pl says then.
            (lease / "state").write_text("absent\n")
        self.env = self._env()
        self.command = [self.localize(a) for a in self.spec["command"] + self.spec.get("args", [])]

    def _config_map(self, rendered: Rendered, source: dict, target: Path) -> Path:
        """The ConfigMap's data as files, with the volume's defaultMode."""
        data = rendered.get("ConfigMap", source["name"])["data"]
        self.machine.mkdir(target)
        for key, text in data.items():
            (target / key).unlink(missing_ok=True)   # a pod recreated on the same home
            (target / key).write_text(text)
            os.chmod(target / key, source.get("defaultMode", 0o644))
        return target

    def _secret(self, source: dict, target: Path) -> Path:
        """The machine's credentials, its certificates or its application's login, as the Secret volume's files,
        with its defaultMode (and only its `items`, when it lists some)."""
        self.machine.mkdir(target)
        tls = source["secretName"].endswith("-tls")
        application = source["secretName"].endswith("-app")
        files = loopback_certificates() if tls else self.machine.application if application else self.machine.secret
        if source.get("items"):
            files = {item["path"]: files[item["key"]] for item in source["items"]}
        for key, text in files.items():
            (target / key).unlink(missing_ok=True)
            (target / key).write_text(text)
            if self.machine.user:
                # A key file PostgreSQL takes: the kubelet's owner (root) and fsGroup, as in the pod.
                owner = "root" if tls and os.geteuid() == 0 else self.machine.user
                shutil.chown(target / key, owner, self.machine.user)
            os.chmod(target / key, source.get("defaultMode", 0o644))
        return target

    def localize(self, value: str) -> str:
        """A rendered value as it must read on this machine."""
        if value in self.hosts:
            return self.hosts[value]
        if value == self.chart_port:
            return str(self.machine.port)
        # One pass, longest mount first: a moved path is never moved again.
        alternatives = "|".join(re.escape(m) for m in sorted(self.mounts, key=len, reverse=True))
        if not alternatives:
            return value
        return re.sub(rf"(?<![\w./-])({alternatives})(?=/|$|[\s'\";&|])",
                      lambda m: str(self.mounts[m.group(1)]), value)

    def _env(self) -> dict[str, str]:
        env = {"PATH": self.machine.path}
        secret_names = set()
        for item in self.spec.get("env", []):
            name = item["name"]
            if "value" in item:
                env[name] = self.localize(str(item["value"]))
                continue
            source = item["valueFrom"]
            if "secretKeyRef" in source:
                secret_names.add(source["secretKeyRef"]["name"])
                env[name] = self.machine.secret[source["secretKeyRef"]["key"]]
            elif "fieldRef" in source:
                env[name] = {"metadata.name": self.pod_name,
                             "metadata.namespace": NAMESPACE}[source["fieldRef"]["fieldPath"]]
            else:
                raise AssertionError(f"env {name}: unsupported valueFrom {source}")
        assert len(secret_names) <= 1, f"credentials from several Secrets: {secret_names}"
        return env



class DatabasePod:
    """A StatefulSet pod: its init containers one after the other, each to its end, then
    entrypoint.sh in the foreground, as the container's PID 1.
    volume_dirs: pod volumes (by name) that are existing directories, e.g. a claim
    of another database; every other mount gets a directory of the pod's own."""

    def __init__(self, machine: Machine, rendered: Rendered, ordinal: int,
                 volume_dirs: dict[str, Path] | None = None):
        sts = rendered.statefulset()
        self.name = f"{sts['metadata']['name']}-{ordinal}"
        self.ip = f"127.0.0.{ordinal + 1}"
        self.machine = machine
        self.home = machine.mkdir(machine.root / self.name)
        pod_spec = sts["spec"]["template"]["spec"]

        def container(name: str) -> Container:
            made = Container(machine, rendered, pod_spec, name, pod_name=self.name, pod_ip=self.ip,
                             home=self.home, volume_dirs=volume_dirs or {})
            entrypoint = (made.scripts / "entrypoint.sh").read_text()
            socket_default = re.search(r'SOCKET_DIR="\$\{SOCKET_DIR:-([^}]+)\}"', entrypoint).group(1)
            assert socket_default in made.mounts, f"entrypoint's socket directory {socket_default} is not a volume mount"
            made.env["SOCKET_DIR"] = made.localize(socket_default)
            made.env["LISTEN_ADDRESSES"] = self.ip
            return made

        self.init_containers = [container(c["name"]) for c in pod_spec.get("initContainers", [])]
        # The other containers (the probe's) serve the kubelet: the harness asks them itself (startup_probe).
        self.others = [container(c["name"]) for c in pod_spec["containers"] if c["name"] != "postgres"]
        self.container = container("postgres")
        self.env = self.container.env
        self.pgdata = Path(self.env["PGDATA"])
        self.record_file = self.env["PRIMARY_RECORD"]   # localized with the rest of the env
        self.log = self.home / "pod.log"
        self.proc: subprocess.Popen | None = None

    def record(self, primary: "DatabasePod | None") -> None:
        """Write the operator's record naming PRIMARY as the database's primary (None: remove it)."""
        path = Path(self.record_file)
        path.unlink(missing_ok=True)
        if primary is not None:
            path.write_text(primary.name + "\n")

    def _resolve_primary(self) -> None:
        """PRIMARY_HOST: the address of the pod the record names (ordinal 0 without one), as DNS would."""
        path = Path(self.record_file)
        recorded = path.read_text().split()[0] if path.exists() and path.read_text().strip() else None
        ordinal = int(recorded.rsplit("-", 1)[1]) if recorded else 0
        for made in (*self.init_containers, self.container):
            made.env["PRIMARY_HOST"] = f"127.0.0.{ordinal + 1}"

    def initialise(self, timeout: float) -> int:
        """Runs the init containers in turn, as the kubelet does: the first to fail ends it (its exit code)."""
        self._resolve_primary()
        for init in self.init_containers:
            self.proc = self.machine.popen(init.command, init.env, self.log, cwd=self.home)
            wait_for(f"{self.name}'s init container {init.spec['name']} to finish",
                     lambda: self.proc.poll() is not None, timeout)
            if self.proc.returncode != 0:
                return self.proc.returncode
        return 0

    def startup_probe(self) -> tuple[list[str], dict[str, str]]:
        """What answers the server container's startup probe here, and its env: a GET /ready to the probe
        container is its `probe.pl ask` (exit 0, the server accepts connections: /ready's 200; its HTTP side
        is tests/chart/test_probe_script.py's), an exec probe its own command."""
        probe = self.container.spec["startupProbe"]
        if "exec" in probe:
            return [self.container.localize(a) for a in probe["exec"]["command"]], {"PATH": self.machine.path}
        assert probe["httpGet"]["path"] == "/ready", probe
        (server,) = [c for c in self.others
                     if any(p["containerPort"] == probe["httpGet"]["port"] for p in c.spec.get("ports", []))]
        assert server.command[-1] == "serve", server.command
        return [*server.command[:-1], "ask"], server.env

    def start(self, timeout: float = 60, init: bool = True) -> "DatabasePod":
        """A pod's start (init containers first); init=False: its server container restarting alone."""
        code = self.initialise(timeout) if init else 0
        assert code == 0, f"{self.name}'s init container exited with {code}:\n{self.logs()}"
        self._resolve_primary()
        self.proc = self.machine.popen(self.container.command, self.env, self.log, cwd=self.home)
        probe, probe_env = self.startup_probe()

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.logs()}")
            return self.machine.run(probe, probe_env).returncode == 0

        wait_for(f"{self.name} to pass its startup probe ({' '.join(probe)})", ready, timeout)
        return self

    def start_expecting_exit(self, timeout: float = 60, init: bool = True) -> tuple[int, bool]:
        """Starts the container and waits for it to exit by itself, probing it all
        along: (exit code, whether the startup probe ever passed). An init container
        that fails ends the pod's start there: its code, and never served."""
        code = self.initialise(timeout) if init else 0
        if code != 0:
            return code, False
        self._resolve_primary()
        self.proc = self.machine.popen(self.container.command, self.env, self.log, cwd=self.home)
        probe, probe_env = self.startup_probe()
        served = False

        def exited() -> bool:
            nonlocal served
            served = served or self.machine.run(probe, probe_env).returncode == 0
            return self.proc.poll() is not None

        wait_for(f"{self.name} to exit", exited, timeout)
        return self.proc.returncode, served

    def leftovers(self) -> list[str]:
        """Command lines of live processes that name a path of this pod (a server
        pg_ctl started is in a session of its own, so the process group is not enough)."""
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:     # gone meanwhile
                continue
            text = " ".join(a.decode(errors="replace") for a in argv if a)
            if str(self.home) in text:
                found.append(text)
        return found

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def sql(self, query: str, db: str = "postgres") -> str:
        """The query's rows as psql -At prints them; fails the test on an error."""
        result = self.machine.psql(self.ip, query, db=db)
        assert result.returncode == 0, f"{self.name}: {query!r} failed:\n{result.stderr}"
        return result.stdout.strip()

    def stop(self, mode: str = "immediate") -> None:
        """pg_ctl stop (-m immediate: a crash; fast: the pod's preStop); then make sure the process group is gone."""
        if self.proc is None:
            return
        if (self.pgdata / "postmaster.pid").exists():
            self.machine.run(["pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop"],
                             {"PATH": self.machine.path}, timeout=30)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


class BackupJob:
    """A run of the backup CronJob's container, with its own backup volume."""

    def __init__(self, machine: Machine, rendered: Rendered, backups: Path):
        cron = rendered.one("CronJob")
        self.machine = machine
        self.backups = backups
        self.home = machine.mkdir(backups.parent / f"{backups.name}-job")
        pod_spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        claim = next(v["name"] for v in pod_spec["volumes"] if "persistentVolumeClaim" in v)
        self.container = Container(machine, rendered, pod_spec, "backup",
                                   pod_name=f"{cron['metadata']['name']}-job", pod_ip=None,
                                   home=self.home, volume_dirs={claim: backups})
        self.env = self.container.env
        self.scripts = self.container.scripts

    def run(self, argv: list[str] | None = None, **env: str) -> subprocess.CompletedProcess:
        """The container's command (or argv), with env entries changed or added."""
        return self.machine.run(argv or self.container.command, {**self.env, **env}, cwd=self.home)

    def script(self, name: str, **env: str) -> subprocess.CompletedProcess:
        """One script from the scripts volume, with the container's env."""
        return self.run(["/bin/sh", str(self.scripts / name)], **env)

    def start(self, **env: str) -> subprocess.Popen:
        """The container's command in the background (its own process group)."""
        return self.machine.popen(self.container.command, {**self.env, **env},
                                  self.home / "job.log", cwd=self.home)

    def dumps(self) -> list[str]:
        return sorted(p.name for p in self.backups.iterdir() if STAMP_RE.match(p.name))

    def files(self) -> list[str]:
        """The dumps' level of the volume: every file, hidden and partial ones included (base/, wal/ and
        PG_MAJOR, the continuous archive's, are test_archive.py's)."""
        return sorted(p.name for p in self.backups.iterdir() if p.name not in ("base", "wal", "PG_MAJOR"))

    def base_backups(self) -> list[str]:
        """The complete base backups; hidden (partial) ones are not listed."""
        base = self.backups / "base"
        return sorted(p.name for p in base.iterdir() if not p.name.startswith(".")) if base.is_dir() else []


class ArchivePod:
    """The archive StatefulSet's pod (wal-archive.sh), streaming from the read-write
    Service (ordinal 0 here) into `backups`/wal, in the background until stop()."""

    def __init__(self, machine: Machine, rendered: Rendered, backups: Path):
        sts = rendered.statefulset("wal-archive")
        pod_spec = sts["spec"]["template"]["spec"]
        claim = next(v["name"] for v in pod_spec["volumes"] if "persistentVolumeClaim" in v)
        self.machine = machine
        self.name = f"{sts['metadata']['name']}-0"
        self.home = machine.mkdir(backups.parent / f"{backups.name}-archive")
        self.container = Container(machine, rendered, pod_spec, "wal-archive", pod_name=self.name, pod_ip=None,
                                   home=self.home, volume_dirs={claim: backups})
        self.container.env["RETRY_SECONDS"] = "0.2"
        self.wal = backups / "wal"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ArchivePod":
        self.proc = self.machine.popen(self.container.command, self.container.env, self.home / "archive.log",
                                       cwd=self.home)
        probe = [self.container.localize(a) for a in self.container.spec["readinessProbe"]["exec"]["command"]]

        def streaming() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"the archive exited with {self.proc.returncode}:\n{self.logs()}")
            return self.machine.run(probe, {"PATH": self.machine.path}).returncode == 0

        wait_for("the archive to stream (its readiness probe)", streaming, timeout=90)
        return self

    def logs(self) -> str:
        path = self.home / "archive.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=15)
