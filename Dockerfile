# haproxy-template-controller: the `htc` command with the HAProxy binary it validates against.
#   docker build -t haproxy-template-controller .
#   docker run --rm haproxy-template-controller render --help
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Debian's haproxy is the binary `haproxy -c` runs in the validation sandbox.
RUN apt-get update \
    && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/* \
    && haproxy -v

COPY pyproject.toml README.md /src/
COPY controller /src/controller
RUN pip install /src && rm -rf /src

# A fixed numeric uid lets Pod securityContext runAsNonRoot verify it without /etc/passwd.
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin htc
USER 10001:10001
WORKDIR /tmp

ENTRYPOINT ["htc"]
CMD ["--help"]
