# cloudzones: one image for every service and the CLI (see deploy/ and charts/cloudzones).
#   docker build -t cloudzones:0.1.0 .
# Stage 1 installs the dependencies from requirements.lock (exact versions, every file's hash checked:
# pip --require-hashes), then the package without its dependencies; stage 2 copies only that virtualenv
# (pip, setuptools and test folders removed; bytecode kept, since the root is read-only in deploy/) onto
# a clean base and runs it as a non-root user.
# The base is pinned by digest (python:3.11-slim's multi-arch index; the tag is kept beside it for people).
# To move to a newer one: `docker buildx imagetools inspect python:3.11-slim` prints the current digest.
# The digest was taken from public Dockerfiles (two independent ones agree); no registry is reachable from
# the machines this was written on, so scripts/build-image passes its own base (see there).
ARG BASE_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7
FROM ${BASE_IMAGE} AS build
# A CA bundle for pip where HTTPS goes through an inspecting proxy (scripts/build-image mounts the host's).
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY cloudzones ./cloudzones
COPY providers ./providers
COPY storageclass ./storageclass
# kubernetes.aio (68 MB: the asyncio client) is never imported (tests/test_layers.py checks that), nor is
# aiohttp and its family, which only it needs.
RUN pip install --no-deps . \
 && pip uninstall --yes aiohttp aiohttp-retry aiosignal aiohappyeyeballs frozenlist multidict propcache yarl \
 && pip uninstall --yes pip setuptools wheel \
 && find /opt/venv/lib -depth \( -name tests -o -name test \) -type d -exec rm -rf {} + \
 && rm -rf /opt/venv/lib/python3*/site-packages/kubernetes/aio

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="cloudzones" \
      org.opencontainers.image.description="Zone-aware Kubernetes on Azure: node and PV zone labels, zoned disks, placement" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/cloudzones/cloudzones"
# 65532 is the conventional "nonroot" id; the manifests pin the same id (runAsUser).
RUN groupadd --system --gid 65532 cloudzones \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin cloudzones
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["cloudzones"]
CMD ["--help"]
