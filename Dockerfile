# syntax=docker/dockerfile:1
# microsched:latest, the image deploy/kubernetes/harvest-agent.yaml runs: this repository's
# package with its Rust extension built in (the simulator, the real runtime, and the harvesting
# agent `microsched harvest`). At the repository's root:
#
#   docker build -t microsched:latest .
#
# The entrypoint is the agent (`docker run --rm microsched:latest` prints its --help); the
# DaemonSet's registration sidecar runs `microsched harvest-pods` through its own `command`.
# deploy/ is copied to the working directory, so the paths `microsched harvest --help` cites
# (deploy/controllers/agent-acbf.json) resolve inside the image too.

ARG PYTHON=3.12

FROM python:${PYTHON}-slim AS build
# The toolchain the repository is built and tested with.
ARG RUST=1.95.0
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
    | sh -s -- -y --profile minimal --default-toolchain "${RUST}"
ENV PATH=/root/.cargo/bin:${PATH}
WORKDIR /src
# What the wheel is built from: the Cargo workspace and the Python package (pyproject.toml's
# maturin backend; README.md and LICENSE are its readme and license-files).
COPY Cargo.toml Cargo.lock pyproject.toml README.md LICENSE ./
COPY crates crates
COPY python python
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:${PYTHON}-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
WORKDIR /opt/microsched
COPY deploy deploy
# Root, as the DaemonSet runs it (privileged: sched_setaffinity on other users' threads, cgroup
# cpusets, IRQ masks).
ENTRYPOINT ["microsched", "harvest"]
CMD ["--help"]
