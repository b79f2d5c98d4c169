# syntax=docker/dockerfile:1
# polyvox on an NVIDIA GPU: VoxCPM2 through the continuous-batching engine.
#   docker build -t polyvox:0.1.0-cuda .
#   docker run --gpus device=0 -p 8000:8000 -v polyvox-models:/data/models polyvox:0.1.0-cuda
# torch's CUDA wheels carry the CUDA runtime; the host needs only the NVIDIA driver and the
# NVIDIA Container Toolkit. Configuration is by POLYVOX_* environment variables (see README).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
# The embedded (GPL) voice is left out: this image serves VoxCPM2 ("voxcpm": PyTorch, the CUDA build
# installed just below).
ARG EXTRAS=voxcpm,text,redis
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/polyvox
ENV PATH=/opt/polyvox/bin:$PATH
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# polyvox itself, from this tree; its dependencies are ranges in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[${EXTRAS}]"

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 polyvox \
    && useradd --system --uid 10001 --gid polyvox --home-dir /data --no-create-home polyvox \
    && mkdir -p /data/models /data/voices /data/cache \
    && chown -R polyvox:polyvox /data
COPY --from=build /opt/polyvox /opt/polyvox
COPY deploy/docker/entrypoint.sh /usr/local/bin/polyvox-entrypoint
# The commit built, for polyvox_build_info: --build-arg POLYVOX_COMMIT=$(git rev-parse --short HEAD).
ARG POLYVOX_COMMIT=unknown
ENV PATH=/opt/polyvox/bin:$PATH \
    POLYVOX_COMMIT=${POLYVOX_COMMIT} \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    HF_HOME=/data/models \
    POLYVOX_HOST=0.0.0.0 \
    POLYVOX_PORT=8000 \
    POLYVOX_MODEL=openbmb/VoxCPM2 \
    POLYVOX_VOICES_DIR=/data/voices \
    POLYVOX_CACHE_DIR=/data/cache \
    POLYVOX_LEXICON_PATH=/data/voices/lexicon.json \
    POLYVOX_FREEZE_VOICES_AT_START=true \
    POLYVOX_WARMUP=true
VOLUME ["/data/models", "/data/voices", "/data/cache"]
USER 10001:10001
WORKDIR /data
EXPOSE 8000
# Liveness only: /health answers while the model loads; /ready says when it can synthesise.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["polyvox-entrypoint", "healthcheck"]
# SIGTERM drains for POLYVOX_SHUTDOWN_GRACE_S (30 s): stop with a longer timeout (docker stop -t 40).
STOPSIGNAL SIGTERM
ENTRYPOINT ["polyvox-entrypoint"]
CMD ["serve"]
