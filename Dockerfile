# The MyDatabase operator image.
#
#   docker build -t mydatabase-operator:0.1.0 .
#
# Three stages: helm is built from Go modules (the version pinned in
# hack/versions.env), the Python package is installed into a venv, and the
# final image holds only the venv, the helm binary and the bundled charts/CRDs.
# It runs as a numeric non-root user on a read-only root filesystem: everything
# that writes (Helm's cache/config/data, the Kubernetes discovery cache) lives
# under /tmp, an emptyDir in charts/mydatabase-operator.
#
# tests/unit/test_image.py lints this file with hadolint and runs the final
# stage's ENTRYPOINT/CMD with its ENV outside a container.

# ---------------------------------------------------------------- helm (Go)
FROM golang:1.26-bookworm AS helm

# Keep in step with HELM_VERSION in hack/versions.env (the image test checks it).
ARG HELM_VERSION=v4.3.1

# A static binary, built by the image's own Go toolchain (never a downloaded one).
ENV CGO_ENABLED=0 \
    GOTOOLCHAIN=local

WORKDIR /build/helm

# A tools module with a `tool` line, as hack/build-tools.sh does: helm's
# module has no replace directives, but this keeps both builds identical.
# The version ldflag makes `helm version` print the real semver; the build
# fails unless it does.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    printf 'module mydb-tools/helm\n\ngo 1.26.0\n\nrequire helm.sh/helm/v4 %s\n\ntool helm.sh/helm/v4/cmd/helm\n' \
        "${HELM_VERSION}" > go.mod \
 && go mod tidy \
 && go build -trimpath \
        -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
        -o /out/helm helm.sh/helm/v4/cmd/helm \
 && test "$(/out/helm version --template '{{.Version}}')" = "${HELM_VERSION}"

# ------------------------------------------------------------ python (venv)
FROM python:3.11-slim-bookworm AS venv

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src

# The dependencies first, in a layer of their own keyed on pyproject.toml: a
# change of the operator's source reinstalls only the package, not every
# dependency. The venv is made without pip or setuptools: the base image's pip
# installs into it (--python), so the runtime venv carries no installer.
# Every dependency ships wheels for CPython 3.11 on Linux: no compiler needed.
COPY pyproject.toml ./
RUN python -m venv --without-pip /opt/venv \
 && python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
      > /tmp/requirements.txt \
 && python -m pip --python /opt/venv/bin/python install --no-cache-dir -r /tmp/requirements.txt

# Then the package itself, from this directory ("."), built as a wheel in an
# isolated build environment; its dependencies are in the venv already.
COPY README.md ./
COPY operator/ operator/
RUN python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-deps . \
 && /opt/venv/bin/mydb-operator --help > /dev/null

# -------------------------------------------------------------------- final
FROM python:3.11-slim-bookworm

ARG VERSION=0.1.0
ARG HELM_VERSION=v4.3.1

LABEL org.opencontainers.image.title="mydatabase-operator" \
      org.opencontainers.image.description="A Kubernetes operator that runs PostgreSQL databases declared as MyDatabase resources, Helm-backed." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim-bookworm" \
      com.example.myapp.helm.version="${HELM_VERSION}"

# MYDB_CHART_DIR: the wheel holds only the Python package, so the operator is
# told where the bundled chart is. MYDB_HELM: the helm binary copied below.
# HELM_DRIVER=configmap: release records hold no secrets (see README.md).
# HELM_*_HOME and KUBECACHEDIR: Helm would otherwise write under $HOME, which
# for a uid without a passwd entry is "/", read-only in the Deployment.
ENV PATH="/opt/venv/bin:${PATH}" \
    MYDB_CHART_DIR=/app/charts/mydatabase \
    MYDB_HELM=/usr/local/bin/helm \
    HELM_DRIVER=configmap \
    HELM_CACHE_HOME=/tmp/helm/cache \
    HELM_CONFIG_HOME=/tmp/helm/config \
    HELM_DATA_HOME=/tmp/helm/data \
    KUBECACHEDIR=/tmp/kube/cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=venv /opt/venv /opt/venv
COPY --from=helm /out/helm /usr/local/bin/helm
COPY charts/ /app/charts/
COPY crds/ /app/crds/

WORKDIR /app

# Numeric, so that runAsNonRoot can verify it without a passwd entry
# (charts/mydatabase-operator runs it as 10001:10001 too).
USER 10001:10001

# kopf's liveness endpoint (mydb-operator run --health-port, default 8080).
EXPOSE 8080

ENTRYPOINT ["mydb-operator"]
CMD ["run"]
