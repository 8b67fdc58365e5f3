"""Every runtime failure is one line on stderr naming the cause and the fix, exit 1; usage
errors exit 2; a traceback only with --debug (docs/operations.md)."""

from __future__ import annotations

import os
import shutil
import socket
import time
from importlib.metadata import version

import pytest

from .conftest import VAULTGRAPH, new_tenant

FIX_PASSWORD = ("set VAULTGRAPH_NEO4J_USER to a user of this database and "
                "VAULTGRAPH_NEO4J_PASSWORD to its password")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_version(cli):
    result = cli("--version")
    assert (result.status, result.stdout, result.stderr) == (
        0, f"vaultgraph {version('vaultgraph')}\n", "")


def test_usage_errors_exit_2(cli):
    result = cli("tenants")
    assert result.status == 2
    assert "the following arguments are required" in result.stderr


@pytest.mark.parametrize(("user", "password"), [
    ("neo4j", "not-the-password"), ("nobody", None)], ids=["password", "user"])
def test_wrong_neo4j_user_or_password(cli, settings, user, password):
    """Neo4j refuses both alike: the line names the user and both settings (a wrong user was
    reported as a wrong password, VAULTGRAPH_NEO4J_USER unnamed)."""
    env = {"VAULTGRAPH_NEO4J_USER": user}
    if password:
        env["VAULTGRAPH_NEO4J_PASSWORD"] = password
    result = cli("tenants", "list", env=env)
    password_file = settings.local_password_file()
    assert (result.status, result.stdout) == (1, "")
    assert result.stderr == (
        f"vaultgraph: Neo4j at {settings.neo4j_uri} refused the user {user!r} with this "
        f"password: {FIX_PASSWORD} (unset, the local server's password file {password_file} is "
        "used)\n")


@pytest.mark.parametrize(("scheme", "argv"), [
    ("neo4j", ("tenants", "list")),
    ("bolt", ("tenants", "create", "--name", "never")),
    ("neo4j", ("applications", "list", "--tenant", "t")),
    ("bolt", ("keys", "status")),
    ("neo4j", ("audit", "verify")),
])
def test_unreachable_uri_fails_at_once(cli, scheme, argv):
    """Nothing listens at the URI's port: the command says so at once. It took 15-17 s, the
    driver retrying its first statement for the request timeout and then some; the bound is
    generous (about 1.5 s now, most of it imports) so a busy machine cannot fail it."""
    uri = f"{scheme}://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = cli(*argv, env={"VAULTGRAPH_NEO4J_URI": uri})
    took = time.monotonic() - started
    assert (result.status, result.stdout) == (1, "")
    assert result.stderr == (
        f"vaultgraph: cannot reach Neo4j at {uri}: start it (vaultgraph neo4j start) or set "
        "VAULTGRAPH_NEO4J_URI to a running server\n")
    assert took < 8, f"{took:.1f} s"


def test_malformed_kek_names_the_entry_never_the_key(cli):
    result = cli("tenants", "list", env={"VAULTGRAPH_KEK": "k1:c2VjcmV0LWtleS1ieXRlcw"})
    assert result.status == 1
    assert result.stderr == (
        "vaultgraph: the key-encryption key in VAULTGRAPH_KEK is malformed (key spec entry 1: "
        "key must decode to 32 bytes): expected '<version>:<base64url of 32 bytes>[,...]', e.g. "
        "k1:$(head -c32 /dev/urandom | basenc --base64url)\n")
    assert "c2VjcmV0" not in result.stderr


def test_debug_shows_the_traceback(cli):
    result = cli("--debug", "tenants", "list", env={"VAULTGRAPH_KEK": "k1:abc"})
    assert result.status == 1
    assert result.stderr.startswith("Traceback (most recent call last):")


def test_port_in_use(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", env={"VAULTGRAPH_PORT": str(port)})
    assert result.status == 1
    assert result.stderr.endswith(
        f"vaultgraph: port {port} on 127.0.0.1 is in use by another process: stop that process "
        "or set VAULTGRAPH_PORT to a free port\n")
    assert len(result.stderr.splitlines()) == 1


def test_neo4j_port_in_use(cli, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("neo4j", "start", env={
            "VAULTGRAPH_HOME": str(tmp_path / "home"), "VAULTGRAPH_NEO4J_BOLT_PORT": str(port),
            "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())})
    assert (result.status, result.stderr) == (
        1, f"vaultgraph: Neo4j's Bolt port {port} is in use by another process: stop that "
           "process or set VAULTGRAPH_NEO4J_BOLT_PORT to a free port\n")


def test_run_from_another_directory_without_a_home(cli, tmp_path, settings):
    """No VAULTGRAPH_HOME: the default home is absolute (XDG), and the message says what to set."""
    result = cli("tenants", "list", env={
        "VAULTGRAPH_HOME": None, "VAULTGRAPH_NEO4J_PASSWORD": None,
        "XDG_DATA_HOME": str(tmp_path / "xdg")})
    port = settings.neo4j_uri.rsplit(":", 1)[1]
    name = "neo4j" if port == "7687" else f"neo4j-{port}"
    assert (result.status, result.stdout) == (1, "")
    assert result.stderr == (
        f"vaultgraph: no Neo4j password for {settings.neo4j_uri}: VAULTGRAPH_NEO4J_PASSWORD is "
        f"not set and no password file {tmp_path / 'xdg' / 'vaultgraph' / name}.password: set "
        "VAULTGRAPH_HOME to the home the local server was started with, or set "
        "VAULTGRAPH_NEO4J_PASSWORD\n")


def test_maven_missing(cli, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    os.symlink(shutil.which("java"), tools / "java")
    result = cli("neo4j", "start", env={
        "PATH": str(tools), "VAULTGRAPH_HOME": str(tmp_path / "fresh"),
        "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())})
    assert (result.status, result.stderr) == (
        1, "vaultgraph: mvn not found on PATH: Java 17+ and Maven fetch Neo4j on first start: "
           "install them (apt-get install openjdk-17-jre-headless maven)\n")


def test_a_bad_setting_is_named(cli):
    result = cli("tenants", "list", env={"VAULTGRAPH_NEO4J_POOL_SIZE": "many"})
    assert (result.status, result.stderr) == (
        1, "vaultgraph: VAULTGRAPH_NEO4J_POOL_SIZE is not a whole number: set "
           "VAULTGRAPH_NEO4J_POOL_SIZE to a whole number or unset it\n")


def test_password_file_found_by_port(cli, settings):
    """#18.8: with no password configured, every command finds the launcher's password file
    for the URI's port (neo4j-<port>.password on a non-default port)."""
    result = cli("tenants", "create", "--name", "by-port",
                 env={"VAULTGRAPH_NEO4J_PASSWORD": None})
    assert result.status == 0, result.stderr
    assert set(result.json()) == {"tenant_id", "application_id", "key"}


def test_neo4j_status_from_any_directory(cli, settings, tmp_path):
    result = cli("neo4j", "status", cwd=tmp_path)
    assert result.status == 0, result.stderr
    status = result.json()
    assert status["running"] is True
    assert status["home"] == str(settings.local_neo4j_home())
    assert status["bolt"] == f"127.0.0.1:{settings.neo4j_bolt_port}"


def test_relative_home_is_made_absolute_for_every_child(cli, settings):
    """`neo4j run` hands its command an absolute home: a command that changes directory still
    finds the server (it used to get the relative path and answer "not running")."""
    home = settings.home_path
    inner = f"cd / && {VAULTGRAPH} neo4j status"
    result = cli("neo4j", "run", "--", "sh", "-c", inner,
                 env={"VAULTGRAPH_HOME": home.name}, cwd=home.parent)
    assert result.status == 0, result.stderr
    assert result.json()["home"] == str(settings.local_neo4j_home())


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("shared", [False, True], ids=["plain", "reuse_port"])
def test_metrics_port_in_use(cli, workers, shared):
    """A metrics port another process holds is named as that port and that setting (it was
    reported as the API port), and never shared with it, even when that process allows
    sharing (SO_REUSEPORT: two instances' scrapes answered in turn)."""
    with socket.socket() as taken:
        if shared:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--workers", workers, timeout=60, env={
            "VAULTGRAPH_PORT": str(free_port()), "VAULTGRAPH_METRICS_PORT": str(port)})
    assert result.status == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"vaultgraph: the metrics port {port} on 127.0.0.1 is in use by another process: stop "
        "that process or set VAULTGRAPH_METRICS_PORT to a free port (0: no metrics listener)")


@pytest.mark.parametrize("action", ["start", "stop", "status", "run"])
def test_neo4j_help_prints_help_and_does_nothing_else(cli, settings, tmp_path, action):
    """`neo4j <action> --help` used to run the action (`start --help` started a server, `stop
    --help` stopped the suite's): every action now prints its help and touches no server."""
    home = tmp_path / "fresh"
    fresh = {"VAULTGRAPH_HOME": str(home), "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
             "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())}
    helped = cli("neo4j", action, "--help", env=None if action == "stop" else fresh)
    assert (helped.status, helped.stderr) == (0, "")
    assert helped.stdout.startswith(f"usage: vaultgraph neo4j {action} [-h]")
    assert not home.exists()  # nothing started, no password or key generated
    assert cli("neo4j", "status").json()["running"] is True  # the suite's server still runs


def test_neo4j_status_names_the_running_servers_browser_port(cli, settings):
    """Asked with another HTTP port than the running server was started with (or none: 7474),
    `neo4j status` named that one; it names the port the server's configuration gives."""
    status = cli("neo4j", "status", env={"VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())}).json()
    assert (status["running"], status["http"]) == (
        True, f"http://127.0.0.1:{settings.neo4j_http_port}/browser/")


@pytest.mark.parametrize("argv", [("run",), ("run", "--"), ("status", "--bogus"),
                                  ("start", "now"), ("stop", "--force")])
def test_neo4j_usage_errors_start_nothing(cli, tmp_path, argv):
    """`run` needs a command (it started a server, then "unexpected IndexError"); an argument
    an action does not take is refused (they were all taken as run's command)."""
    home = tmp_path / "fresh"
    result = cli("neo4j", *argv, env={
        "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())})
    assert (result.status, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: vaultgraph ")
    expected = ("a command to run is required, as in vaultgraph neo4j run -- pytest -q"
                if argv[0] == "run" else "unrecognized arguments: ")
    assert expected in result.stderr.splitlines()[-1]
    assert not home.exists()


def test_neo4j_run_names_a_command_that_does_not_exist_before_starting(cli, tmp_path):
    home = tmp_path / "fresh"
    result = cli("neo4j", "run", "--", "no-such-command-here", env={
        "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port())})
    assert (result.status, result.stdout, result.stderr) == (
        127, "", "vaultgraph: cannot run 'no-such-command-here': no such command, or not "
                 "executable: name a command on PATH or a path to one, as in vaultgraph neo4j "
                 "run -- pytest -q\n")
    assert not home.exists()


def test_neo4j_run_passes_the_rest_of_the_line_with_or_without_a_separator(cli):
    for argv in (("--", "sh", "-c", "exit 4"), ("sh", "-c", "exit 4")):
        assert cli("neo4j", "run", *argv).status == 4


@pytest.mark.parametrize("host", ["999.1.1.1", "example.invalid"])
@pytest.mark.parametrize("setting", ["VAULTGRAPH_HOST", "VAULTGRAPH_METRICS_HOST"])
def test_an_address_this_machine_cannot_listen_on_is_named(cli, setting, host):
    """It was "unexpected gaierror", with an asyncio stack in the log."""
    result = cli("serve", timeout=60, env={
        "VAULTGRAPH_PORT": str(free_port()), "VAULTGRAPH_METRICS_PORT": str(free_port()),
        setting: host})
    assert (result.status, result.stdout, result.stderr) == (
        1, "", f"vaultgraph: {setting} is {host!r}, not an address of this machine: set "
               f"{setting} to an address or host name of this machine (127.0.0.1; 0.0.0.0 for "
               "every interface)\n")


@pytest.mark.parametrize("workers", ["-1", "many"])
def test_workers_flag_out_of_range_is_a_usage_error_naming_the_flag(cli, workers):
    """`serve --workers -1` was reported as "VAULTGRAPH_WORKERS is -1"."""
    result = cli("serve", "--workers", workers)
    assert (result.status, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1] == (
        f"vaultgraph serve: error: argument --workers: {workers!r} is not a whole number of 0 "
        "or more (0: one per CPU)")


def test_the_metrics_port_is_checked_before_neo4j_starts(cli, tmp_path):
    """Like the API's port, the metrics port is checked first: it was checked only once the
    local Neo4j had started and the bootstrap had run."""
    home = tmp_path / "fresh"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--local-neo4j", timeout=300, env={
            "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_KEK_FILE": None,
            "VAULTGRAPH_NEO4J_URI": None, "VAULTGRAPH_NEO4J_PASSWORD": None,
            "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
            "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port()),
            "VAULTGRAPH_PORT": str(free_port()), "VAULTGRAPH_METRICS_PORT": str(port)})
    assert (result.status, result.stderr) == (
        1, f"vaultgraph: the metrics port {port} on 127.0.0.1 is in use by another process: stop "
           "that process or set VAULTGRAPH_METRICS_PORT to a free port (0: no metrics "
           "listener)\n")
    assert not home.exists()  # no Neo4j, no key, no tenant


@pytest.mark.parametrize("argv", [("keys", "status"), ("neo4j", "status"), ("tenants", "list")])
def test_a_closed_stdout_ends_any_command_quietly(cli, argv):
    """`vaultgraph keys status | head -3`: the reader went away; the command stops without a
    word (it was "unexpected BrokenPipeError"), status 128 + SIGPIPE, as `audit export` does.
    `tenants list` writes its lines one by one; it went on and ended with 0."""
    import signal
    import subprocess

    if argv[0] == "tenants":
        new_tenant(cli)  # a line to write

    with subprocess.Popen([VAULTGRAPH, *argv], env=cli.env, cwd=cli.cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()  # before anything is written: every write meets a closed pipe
        stderr = proc.stderr.read().decode()
        assert (proc.wait(timeout=120), stderr) == (128 + signal.SIGPIPE, "")
