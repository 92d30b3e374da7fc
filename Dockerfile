# haproxy-template-controller: the `htc` command with the HAProxy binary it validates against.
#   docker build -t haproxy-template-controller .
#   docker run --rm --read-only --tmpfs /tmp haproxy-template-controller render --help
#
# Two stages: the first builds wheels (ours and every dependency's) with the build tools a
# source distribution may need; the second installs only those wheels, offline, on the same
# pinned base, plus Debian's haproxy (2.6 on bookworm) for `haproxy -c` and --deploy embedded.
# The base is pinned by full version and Debian release, once, as the stage both others start
# from (written out rather than through an ARG, so static checkers see the pinned tag);
# tests/packaging/test_dockerfile.py checks that, hadolint, the non-root user and the
# entrypoint statically (no Docker engine runs where the tests do), and
# tests/packaging/test_checkov.py runs checkov on it.
FROM python:3.11.11-slim-bookworm AS base

FROM base AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY controller ./controller
RUN pip wheel --wheel-dir /wheels .

FROM base
LABEL org.opencontainers.image.title="haproxy-template-controller" \
      org.opencontainers.image.description="Renders HAProxy configurations from templates; deploys only what passed every validation stage" \
      org.opencontainers.image.licenses="Apache-2.0"

# Bytecode is compiled at install time; at run time nothing is written outside /tmp, so the
# image runs with a read-only root filesystem and an emptyDir (or tmpfs) at /tmp.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TMPDIR=/tmp

# Debian's haproxy is the binary `haproxy -c` runs in the validation sandbox. Its version is
# not pinned: the archive keeps only the latest security update of the release, so a pinned
# version would stop building; the Debian release is pinned by the base image instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/* \
    && haproxy -v

# Offline: our wheel and the dependency wheels the first stage built, nothing else.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/haproxy_template_controller-*.whl \
    && htc --help >/dev/null

# A fixed numeric uid lets Pod securityContext runAsNonRoot verify it without /etc/passwd.
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin htc
USER 10001:10001
WORKDIR /tmp

ENTRYPOINT ["htc"]
CMD ["--help"]
