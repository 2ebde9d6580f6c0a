# syntax=docker/dockerfile:1
#
# The memstream worker image.
#
#     docker build -t memstream .
#     docker run --rm memstream --help
#
# The image runs `memstream worker` by default. The worker creates missing
# topics and upgrades the database schema before it consumes; the Alembic
# migrations it needs are copied next to the working directory.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- build stage
# Installs the project and its dependencies into a virtual environment that
# the runtime stage copies; pip, setuptools and the build cache stay behind.
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/memstream
WORKDIR /src
# Dependencies first: this layer is rebuilt only when pyproject.toml changes
# (README.md is left out: the image needs no long description).
# cryptography: MySQL 8 authenticates with caching_sha2_password, and
# aiomysql/PyMySQL need it for that handshake over a connection without TLS.
COPY pyproject.toml ./
RUN mkdir -p streams agents \
    && touch streams/__init__.py agents/__init__.py \
    && /opt/memstream/bin/pip install . "cryptography>=42" \
    && /opt/memstream/bin/pip uninstall -y memstream \
    && rm -rf build ./*.egg-info streams agents
COPY streams ./streams
COPY agents ./agents
RUN /opt/memstream/bin/pip install --no-deps .

# -------------------------------------------------------------- runtime stage
FROM ${PYTHON_IMAGE}

# a fixed uid/gid, so that Kubernetes' runAsNonRoot can verify it
RUN groupadd --system --gid 10001 memstream \
    && useradd --system --uid 10001 --gid memstream --home-dir /app \
        --no-create-home --shell /usr/sbin/nologin memstream \
    && mkdir -p /app /var/lib/memstream \
    && chown memstream:memstream /var/lib/memstream

COPY --from=build /opt/memstream /opt/memstream
WORKDIR /app
COPY alembic.ini ./
COPY migrations ./migrations

# MEMSTREAM_WEB__HOST: listen on every interface, not only loopback, so that
#   Prometheus, the health check of the orchestrator and the stats API reach it.
# MEMSTREAM_KAFKA__DATA_DIR: Faust's state directory, writable by the user.
#   Tables live in memory and are rebuilt from their changelog topics, so
#   nothing in it has to survive a restart.
ENV PATH=/opt/memstream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MEMSTREAM_MIGRATIONS_DIR=/app/migrations \
    MEMSTREAM_WEB__HOST=0.0.0.0 \
    MEMSTREAM_WEB__PORT=6066 \
    MEMSTREAM_KAFKA__DATA_DIR=/var/lib/memstream

USER 10001:10001

# /metrics, /health/live, /health/ready and /stats/*
EXPOSE 6066

# Not live when the worker is stuck (lag with no progress), so Docker marks it
# unhealthy. The slim image has no curl: the check uses Python's urllib, which
# exits non-zero on any answer other than 2xx and on a refused connection.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request as r; sys.exit(0 if r.urlopen('http://127.0.0.1:%s/health/live' % os.environ.get('MEMSTREAM_WEB__PORT', '6066'), timeout=4).status == 200 else 1)"]

ENTRYPOINT ["memstream"]
CMD ["worker"]
