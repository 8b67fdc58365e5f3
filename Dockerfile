# The vaultgraph service. Neo4j runs beside it (docker-compose.yml), never inside this image.
#   docker build -t vaultgraph .

# -- build: install the package and its dependencies into a virtualenv ----------------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/vaultgraph
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vaultgraph ./vaultgraph
# The Cypher catalog, the Neo4j launcher's files and the documentation's pages (which the
# command line points at) ship inside the package (pyproject.toml).
COPY cypher ./cypher
COPY deploy/neo4j ./deploy/neo4j
COPY docs ./docs
RUN /opt/vaultgraph/bin/pip install .

# -- run: the virtualenv (the Cypher statements inside it), an unprivileged user -----------
FROM python:3.11-slim
RUN groupadd --system --gid 10001 vaultgraph \
 && useradd --system --uid 10001 --gid vaultgraph --home-dir /var/lib/vaultgraph \
            --create-home --shell /usr/sbin/nologin vaultgraph
COPY --from=build /opt/vaultgraph /opt/vaultgraph
# The key-encryption key and the Neo4j password come from the environment at run time
# (VAULTGRAPH_KEK or VAULTGRAPH_KEK_FILE, VAULTGRAPH_NEO4J_PASSWORD); none is baked in.
ENV PATH=/opt/vaultgraph/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VAULTGRAPH_HOST=0.0.0.0 \
    VAULTGRAPH_PORT=8080 \
    VAULTGRAPH_HOME=/var/lib/vaultgraph
USER vaultgraph
WORKDIR /var/lib/vaultgraph
EXPOSE 8080
# Liveness only (/health makes no database call); /ready also checks Neo4j.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('VAULTGRAPH_PORT', '8080') + '/health', timeout=2)"]
CMD ["vaultgraph", "serve"]
