# cloudzones: one image for `cloudzones controller`, `node-agent` and `webhook` (see deploy/).
#   docker build -t cloudzones:0.1.0 .
# Stage 1 installs the package and its dependencies into a virtualenv; stage 2 copies only that
# virtualenv onto a clean base (no pip cache, no build tools) and runs it as a non-root user.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY cloudzones ./cloudzones
COPY providers ./providers
COPY storageclass ./storageclass
RUN pip install . && pip uninstall --yes pip setuptools wheel

FROM python:3.11-slim
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
