# syntax=docker/dockerfile:1
# A slim, non-root image whose default command is the bot: `galley run`.
FROM python:3.11-slim AS build
WORKDIR /app
RUN pip install --no-cache-dir uv==0.13.9
COPY requirements.lock pyproject.toml README.md ./
COPY core ./core
COPY bot ./bot
COPY galley ./galley
# Runtime dependencies only, each at its pinned version (the lock also pins dev tools).
RUN uv venv /venv \
    && uv pip install --no-cache -p /venv -c requirements.lock .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 galley
COPY --from=build /venv /venv
ENV PATH="/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    GALLEY_CONFIG=/config/galley.toml \
    GALLEY_DATABASE_URL=sqlite:////data/galley.db
RUN mkdir -p /data /config && chown galley:galley /data
USER 10001
WORKDIR /data
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=3s CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/healthz')"]
CMD ["galley", "run"]
