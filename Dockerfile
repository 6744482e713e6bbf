# syntax=docker/dockerfile:1
# A slim, non-root image whose default command is the bot: `galley run`.
# An exact patch release, never a floating tag: 3.11.13 is the first 3.11 whose
# html.parser is no longer quadratic on hostile markup (CVE-2025-6069); Galley parses
# pages with lxml anyway, but other libraries may still use the standard parser.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
FROM ${PYTHON_IMAGE} AS build
WORKDIR /app
RUN pip install --no-cache-dir uv==0.13.9
COPY requirements.lock requirements-dev.lock pyproject.toml README.md ./
COPY core ./core
COPY bot ./bot
COPY galley ./galley
# Runtime dependencies only, each at its pinned version (the Bluesky and Mastodon clients
# among them: publishing is the bot's job).
# Bytecode is compiled here: the runtime user cannot write .pyc files into /venv, and
# without them every `galley` command would compile its imports again (seconds).
RUN uv venv /venv \
    && uv pip install --no-cache --compile-bytecode -p /venv -c requirements.lock .

FROM ${PYTHON_IMAGE}
RUN useradd --create-home --uid 10001 galley
COPY --from=build /venv /venv
ENV PATH="/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    GALLEY_CONFIG=/config/galley.toml \
    GALLEY_DATABASE_URL=sqlite:////data/galley.db \
    GALLEY_HTTP_HOST=0.0.0.0 \
    GALLEY_HTTP_PORT=3000
RUN mkdir -p /data /config && chown galley:galley /data
USER 10001
WORKDIR /data
VOLUME ["/data"]
# Inside a container every interface is the container's own: reachable only where the
# port is published (-p) or from the container's network. Bare `galley run` binds 127.0.0.1.
EXPOSE 3000
# Ready, not merely alive: the scheduler runs, Slack answered auth.test and the database
# answers (a 503 from /readyz makes urlopen raise, so the probe exits non-zero).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('GALLEY_HTTP_PORT', '3000'), timeout=4)"]
# SIGTERM lets running model calls finish for --shutdown-grace seconds: give the
# container a longer stop timeout than that (docker run --stop-timeout 45).
CMD ["galley", "run", "--shutdown-grace", "30"]
