"""The container path, validated statically: no container engine runs on this machine.

docker-compose.yml (and the scale-out override) against the compose-spec JSON schema shipped by
check-jsonschema; the Dockerfile through dockerfile-parse; every setting, port, secret, volume
and health check cross-checked against the code that reads them; the service's health-check
commands run for real against a live service.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.resources
import io
import json
import re
import sys
import tomllib
from dataclasses import fields
from pathlib import Path

import jsonschema
import pytest
from dockerfile_parse import DockerfileParser
from ruamel.yaml import YAML

from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.settings import PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SCALE = ROOT / "docker-compose.scale.yml"
NGINX = ROOT / "deploy" / "compose" / "nginx.conf"
KNOWN = {PREFIX + f.name.upper() for f in fields(Settings)}


class _Reset:
    """Compose's `!reset` tag: the key is removed when the override is merged."""


def _load(path: Path) -> dict:
    yaml = YAML(typ="safe", pure=True)
    yaml.constructor.add_constructor("!reset", lambda loader, node: _Reset())
    return yaml.load(path.read_text())


def _merge(base, override):
    """Compose's merge of an override file: maps merge, `!reset` removes, the rest replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = copy.deepcopy(base)
        for key, value in override.items():
            if isinstance(value, _Reset):
                out.pop(key, None)
            elif key in out:
                out[key] = _merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    return copy.deepcopy(override)


@pytest.fixture(scope="module")
def compose() -> dict:
    return _load(COMPOSE)


@pytest.fixture(scope="module")
def scaled(compose) -> dict:
    return _merge(compose, _load(SCALE))


@pytest.fixture(scope="module")
def schema() -> dict:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath("compose-spec.json").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO((ROOT / "Dockerfile").read_bytes()))


def _validate(schema, document) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


def test_compose_file_matches_the_compose_spec(schema, compose):
    assert _validate(schema, compose) == []


def test_scale_out_override_merged_matches_the_compose_spec(schema, scaled):
    assert _validate(schema, scaled) == []


def test_the_schema_check_catches_mistakes(schema, compose):
    broken = copy.deepcopy(compose)
    broken["services"]["vaultgraph"]["healthcheck"]["test"] = 42
    broken["services"]["neo4j"]["restart_policy"] = "always"
    errors = _validate(schema, broken)
    assert any("healthcheck/test" in e for e in errors)
    assert any("restart_policy" in e for e in errors)


def test_images_and_the_built_service(compose, dockerfile):
    assert compose["services"]["neo4j"]["image"] == "neo4j:5.26-community"
    assert compose["services"]["vaultgraph"]["build"] == "."
    assert dockerfile.baseimage.startswith("python:3.11")


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


# What the local launcher tunes in Neo4j for the vault's sake (not paths, ports, memory sizes or
# Browser settings, which differ on purpose): the container's Neo4j must get the same.
TUNED = ("dbms.usage_report.enabled", "server.bolt.connection_keep_alive_for_requests",
         "db.tx_log.rotation.retention_policy", "dbms.cypher.min_replan_interval",
         "db.transaction.timeout", "internal.cypher.use_parameter_size")


def _neo4j_env_name(setting: str) -> str:
    """The neo4j image's environment name of a setting: `_` doubled, `.` as `_`."""
    return "NEO4J_" + setting.replace("_", "__").replace(".", "_")


def test_the_containers_neo4j_is_tuned_as_the_launchers(compose, tmp_path):
    LocalNeo4j(home=tmp_path / "neo4j", lib_dir=tmp_path / "lib").write_conf()
    lines = (tmp_path / "neo4j" / "conf" / "neo4j.conf").read_text().splitlines()
    local = dict(line.split("=", 1) for line in lines if "=" in line and line[0] != "#")
    env = _environment(compose["services"]["neo4j"])
    assert _neo4j_env_name("db.tx_log.rotation.retention_policy") \
        == "NEO4J_db_tx__log_rotation_retention__policy"
    for setting in TUNED:
        assert env.get(_neo4j_env_name(setting)) == local[setting], setting


def test_behind_the_proxy_each_client_address_is_limited_by_nginx_not_the_service(scaled):
    """Behind nginx every request's peer is nginx, so the service's per-address throttle of
    failed authentications (api/ratelimit.py, `request.remote`) would put every client in one
    budget: one client's 20 bad keys and everyone gets 429. The scale-out deployment turns it
    off and nginx limits each real client address, with the service's problem+json 429."""
    assert _environment(scaled["services"]["vaultgraph"])["VAULTGRAPH_AUTH_FAILURE_LIMIT"] == "0"
    nginx = NGINX.read_text()
    zone = re.search(r"limit_req_zone\s+\$binary_remote_addr\s+zone=(\w+):\w+\s+"
                     r"rate=(\d+)r/s;", nginx)
    assert zone, "no per-address limit_req_zone"
    location = re.search(r"location / \{(.*?)\}", nginx, re.S).group(1)
    burst = re.search(rf"limit_req\s+zone={zone.group(1)}\s+burst=(\d+)\s+nodelay;", location)
    assert burst, "the zone is not applied to the proxied location"
    # Never below what the service itself would serve one application on every replica.
    replicas = scaled["services"]["vaultgraph"]["deploy"]["replicas"]
    defaults = Settings()
    assert int(zone.group(2)) >= replicas * defaults.rate_limit
    assert int(burst.group(1)) >= replicas * defaults.rate_burst
    assert re.search(r"limit_req_status\s+429;", nginx)
    assert "error_page 429 = @rate_limited;" in location
    answer = re.search(r"location @rate_limited \{(.*?)\n    \}", nginx, re.S).group(1)
    assert "add_header Retry-After" in answer and "application/problem+json" in answer
    body = json.loads(re.search(r"return 429 '(.*)';", answer).group(1))
    assert body["type"] == "https://vaultgraph.dev/problems/rate-limited" and body["status"] == 429


def test_service_settings_are_known_to_settings_py(compose, scaled, dockerfile):
    env = _environment(compose["services"]["vaultgraph"])
    assert set(_environment(scaled["services"]["vaultgraph"])) - KNOWN == set()
    names = set(env) | {k for k in dockerfile.envs if k.startswith(PREFIX)}
    assert names, "no VAULTGRAPH_* settings found"
    assert names - KNOWN == set()


def test_the_kek_comes_from_a_secret_not_an_environment_literal(compose, dockerfile):
    service = compose["services"]["vaultgraph"]
    env = _environment(service)
    assert "VAULTGRAPH_KEK" not in env and "VAULTGRAPH_KEK" not in dockerfile.envs
    target = env["VAULTGRAPH_KEK_FILE"]
    name = target.removeprefix("/run/secrets/")
    assert target == f"/run/secrets/{name}"
    assert name in service["secrets"]
    assert "file" in compose["secrets"][name]
    # No key material anywhere in the files.
    key_like = re.compile(r"k\d+:[A-Za-z0-9_-]{43}")
    for path in (COMPOSE, SCALE, ROOT / "Dockerfile"):
        assert not key_like.search(path.read_text()), path


def test_neo4j_data_is_on_a_named_volume(compose):
    mounts = dict(v.split(":", 1)[::-1] for v in compose["services"]["neo4j"]["volumes"])
    assert mounts["/data"] in compose["volumes"]


def _published(service: dict) -> list[tuple[str, int, int]]:
    out = []
    for spec in service.get("ports", []):
        host_ip, host_port, container_port = str(spec).split(":")
        out.append((host_ip, int(host_port), int(container_port)))
    return out


def test_ports_match(compose, scaled, dockerfile):
    service_env = _environment(compose["services"]["vaultgraph"])
    port = int(service_env["VAULTGRAPH_PORT"])
    assert port == int(dockerfile.envs["VAULTGRAPH_PORT"])
    assert str(port) in re.findall(r"^EXPOSE\s+(\d+)", dockerfile.content, re.M)
    assert [(p[0], p[2]) for p in _published(compose["services"]["vaultgraph"])] == [
        ("127.0.0.1", port)]
    # The service reaches Neo4j on the Bolt port Neo4j publishes.
    bolt = int(service_env["VAULTGRAPH_NEO4J_URI"].rsplit(":", 1)[1])
    assert bolt in [p[2] for p in _published(compose["services"]["neo4j"])]
    assert service_env["VAULTGRAPH_NEO4J_URI"].split("//")[1].split(":")[0] == "neo4j"
    # Every port is published on loopback only.
    for service in scaled["services"].values():
        assert all(p[0] == "127.0.0.1" for p in _published(service))
    # Scaled: the replicas publish nothing, the proxy publishes the one port and forwards to
    # the service's port by its compose name.
    assert "ports" not in scaled["services"]["vaultgraph"]
    assert scaled["services"]["vaultgraph"]["deploy"]["replicas"] >= 2
    assert [p[1] for p in _published(scaled["services"]["proxy"])] == [8080]
    nginx = NGINX.read_text()
    assert f"http://vaultgraph:{port}" in nginx
    listen = int(re.search(r"listen\s+(\d+);", nginx).group(1))
    assert [p[2] for p in _published(scaled["services"]["proxy"])] == [listen]
    mount = scaled["services"]["proxy"]["volumes"][0].split(":")[0]
    assert (ROOT / mount).resolve() == NGINX


def test_the_image_contains_what_it_copies(dockerfile):
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    for instruction in dockerfile.structure:
        if instruction["instruction"] != "COPY" or "--from=" in instruction["value"]:
            continue
        *sources, _dest = instruction["value"].split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert source.rstrip("/") not in ignored, f"{source} is in .dockerignore"
    # The Cypher catalog ships inside the installed package: the build stage copies what
    # pyproject.toml maps into it before `pip install .`, and nothing points elsewhere.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for folder in config["package-dir"].values():
        assert f"COPY {folder} ./{folder}" in dockerfile.content, folder
    assert "VAULTGRAPH_CYPHER_DIR" not in dockerfile.envs


def _healthcheck_argv(test: list[str]) -> list[str]:
    assert test[0] == "CMD", test
    return test[1:]


def _dockerfile_healthcheck(dockerfile) -> list[str]:
    line = next(i["value"] for i in dockerfile.structure if i["instruction"] == "HEALTHCHECK")
    return json.loads(line.split("CMD", 1)[1].strip())


def test_healthcheck_commands_exist_in_their_images(compose, scaled, dockerfile):
    # python:3.11-slim has `python` on PATH; the neo4j image has cypher-shell on PATH
    # (/var/lib/neo4j/bin); nginx:alpine has busybox wget. The vaultgraph command's own
    # behaviour is checked below, against a live service.
    assert _dockerfile_healthcheck(dockerfile)[0] == "python"
    assert _healthcheck_argv(compose["services"]["vaultgraph"]["healthcheck"]["test"])[0] == (
        "python")
    neo4j_test = compose["services"]["neo4j"]["healthcheck"]["test"]
    assert neo4j_test[0] == "CMD-SHELL" and neo4j_test[1].startswith("cypher-shell ")
    assert _healthcheck_argv(scaled["services"]["proxy"]["healthcheck"]["test"])[0] == "wget"
    # The proxy waits for a healthy replica, the service for a healthy Neo4j.
    assert scaled["services"]["proxy"]["depends_on"]["vaultgraph"]["condition"] == (
        "service_healthy")
    assert compose["services"]["vaultgraph"]["depends_on"]["neo4j"]["condition"] == (
        "service_healthy")


async def _run_python_check(argv: list[str], port: int) -> int:
    assert argv[0] == "python"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv[1:], env={"VAULTGRAPH_PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await proc.wait()


async def test_service_healthchecks_pass_against_a_live_service(aiohttp_server, app, compose,
                                                                dockerfile, unused_tcp_port):
    server = await aiohttp_server(app)
    liveness = _dockerfile_healthcheck(dockerfile)
    readiness = _healthcheck_argv(compose["services"]["vaultgraph"]["healthcheck"]["test"])
    assert "/health" in liveness[-1] and "/ready" in readiness[-1]
    assert await _run_python_check(liveness, server.port) == 0
    assert await _run_python_check(readiness, server.port) == 0
    # …and fail where nothing listens.
    assert await _run_python_check(liveness, unused_tcp_port) != 0


class _Missing(Exception):
    """What compose stops with: a `${VAR:?message}` whose variable is unset or empty."""


_VARIABLE = re.compile(r"\$(?:\$|\{(\w+)(?:(:?)([-?])([^}]*))?\})")


def _interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation of `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
    `${VAR:?message}`, `${VAR?message}` and `$$` (a literal `$`)."""
    def value(match: re.Match) -> str:
        name, colon, kind, word = match.groups()
        if name is None:
            return "$"
        missing = name not in env or (colon and env[name] == "")
        if kind == "?" and missing:
            raise _Missing(f"required variable {name} is missing a value: {word}")
        return word if kind == "-" and missing else env.get(name, "")

    return _VARIABLE.sub(value, text)


def test_compose_refuses_to_start_without_a_neo4j_password():
    """No known fallback password (it was `vaultgraph-dev-password` when none was set):
    compose stops before anything starts, and says what to set."""
    text = COMPOSE.read_text()
    assert "dev-password" not in text
    for env in ({}, {"VAULTGRAPH_NEO4J_PASSWORD": ""}):
        with pytest.raises(_Missing) as caught:
            _interpolate(text, env)
        assert str(caught.value) == (
            "required variable VAULTGRAPH_NEO4J_PASSWORD is missing a value: set "
            "VAULTGRAPH_NEO4J_PASSWORD (in .env or the environment) to a long random password")
    set_ = YAML(typ="safe", pure=True).load(
        _interpolate(text, {"VAULTGRAPH_NEO4J_PASSWORD": "a-long-random-one"}))
    assert _environment(set_["services"]["neo4j"])["NEO4J_AUTH"] == "neo4j/a-long-random-one"
    service = _environment(set_["services"]["vaultgraph"])
    assert service["VAULTGRAPH_NEO4J_PASSWORD"] == "a-long-random-one"
    assert service["VAULTGRAPH_LOG_LEVEL"] == "INFO"  # the other settings keep their defaults
    # The health check's `$${NEO4J_AUTH#*/}` is the container's variable, left to its shell.
    assert "${NEO4J_AUTH#*/}" in " ".join(set_["services"]["neo4j"]["healthcheck"]["test"])
