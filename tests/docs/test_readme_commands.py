"""Every shell command in the README and in docs/ runs as written.

Each page's ```sh blocks are run in order, in one bash per page (`set -euo pipefail`, so an
undefined variable or a failing command stops it), against a live `vaultgraph serve` on the real
Neo4j, with a fresh tenant per page, from a directory whose `.vaultgraph/admin.key` holds that
tenant's administrator key (so the README's `export ADMIN=…` works as written, as after
`make run`). The README gets nothing else: its walk-through must stand alone. A page of docs/
also gets what its readers are told to carry over from the README's walk-through: `$ADMIN`
(the header) and `$V` (the service's address). The one rewrite of the text:
`http://127.0.0.1:8080` and `localhost:8080` become the live service's address.

Each `curl` records its HTTP status (a `-w` to stderr), and the test compares it with the
page's own claim: the first `# → NNN` after the command, else any 2xx.

A block right after `<!-- not run by tests/docs/test_readme_commands.py: <reason> -->` is not
run (`make run`, Docker, the benchmark, …); SKIPPED_AT_MOST bounds how many there are.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from factories import service_env

from vaultgraph.testing.service import ServiceProcess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
SKIP_MARK = "<!-- not run by tests/docs/test_readme_commands.py:"
SKIPPED_AT_MOST = 14  # in all pages together
SHELLS = ("sh", "bash", "shell")

_FENCE = re.compile(r"^```(\w*)\s*$")
_CALL = re.compile(r"^\s*(?:[A-Za-z_]\w*=\$\()?curl\s")
_FUNCTION = re.compile(r"^\s*([A-Za-z_]\w*)\(\)\s*\{")
_CLAIM = re.compile(r"→\s*(\d{3})\b")
_STATUS = re.compile(r"^README-STATUS (\d{3})$", re.M)


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    text: str
    skipped: str | None  # the reason, when not run

    def expected_statuses(self) -> list[int | None]:
        """Per HTTP call in the block, in order: the status its `# → NNN` comment claims
        (None: any 2xx). A call is a line starting with curl (or `X=$(curl`), or a call of a
        function the block defines."""
        functions = {m.group(1) for m in map(_FUNCTION.match, self.text.splitlines()) if m}
        calls: list[int | None] = []
        claimed = True
        for raw in self.text.splitlines():
            code, _, comment = raw.partition("#") if not raw.lstrip().startswith("#") \
                else ("", "", raw.lstrip()[1:])
            word = code.split(maxsplit=1)[0] if code.split() else ""
            if _FUNCTION.match(code):
                pass
            elif _CALL.match(code) or word in functions:
                calls.append(None)
                claimed = False
            match = _CLAIM.search(comment)
            if match and calls and not claimed:
                calls[-1] = int(match.group(1))
                claimed = True
        return calls


def shell_blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in SHELLS:
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            reason = before.removeprefix(SKIP_MARK).removesuffix("-->").strip() \
                if before.startswith(SKIP_MARK) else None
            blocks.append(Block(i + 1, "\n".join(lines[i + 1:end]), reason))
        i = end + 1
    return blocks


def test_the_parser_reads_calls_and_claims():
    block = Block(1, "\n".join([
        "V=x",
        "f() { curl -s $V -d \"$1\"; }",
        "curl -s $V/a   # → 204",
        "T=$(curl -s $V/b -d '{",
        "  \"a\": 1}' | python3 -c 'print(1)')",
        "# → 201 {\"id\": …}",
        "# the same again → 409 (not run)",
        "f '{}'          # → cust-ada",
        "curl -s $V/c \\",
        "  -H 'x: y'",
        "# → 404, and then",
    ]), None)
    assert block.expected_statuses() == [204, 201, None, 404]


@pytest.fixture(scope="module")
def service(settings):
    with ServiceProcess(service_env(settings)) as running:
        yield running


PRELUDE = """set -euo pipefail
curl() { command curl "$@" -w '%{stderr}\\nREADME-STATUS %{http_code}\\n'; }
"""


def test_the_pages_hold_enough_commands_and_each_skip_says_why():
    blocks = {page: shell_blocks(page) for page in PAGES}
    skipped = [(page.name, b.line, b.skipped) for page, bs in blocks.items() for b in bs
               if b.skipped is not None]
    assert all(reason for _, _, reason in skipped), skipped
    assert len(skipped) <= SKIPPED_AT_MOST, skipped
    # the README's walk-through: the applications, a token, two reads, links, graph, search, log
    assert len([b for b in blocks[README] if b.skipped is None]) >= 7
    assert sum(1 for bs in blocks.values() for b in bs if b.skipped is None) >= 19


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.skipped is None
                                                           for b in shell_blocks(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_command_runs_as_written(service, tmp_path, page):
    tenant = service.create_tenant(page.stem[:40])
    (tmp_path / ".vaultgraph").mkdir()
    (tmp_path / ".vaultgraph" / "admin.key").write_text(tenant.key)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    if page != README:  # what a page tells its reader to keep from the README's walk-through
        env |= {"ADMIN": f"SVC-API-KEY: {tenant.key}", "V": service.url}
    for block in (b for b in shell_blocks(page) if b.skipped is None):
        text = block.text.replace("http://127.0.0.1:8080", service.url)
        text = text.replace("localhost:8080", service.url)
        script = tmp_path / f"block-{block.line}.sh"
        # one shell for all blocks, in order: each block sees what the ones before it set
        state = tmp_path / "state.sh"
        script.write_text(PRELUDE + (f". {state}\n" if state.exists() else "") + text
                          + f"\ndeclare -p | grep -v '^declare -[a-zA-Z]*r' > {state}\n")
        result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        where = f"{page.relative_to(ROOT)} line {block.line}"
        assert result.returncode == 0, (where, result.returncode, result.stderr[-2000:])
        statuses = [int(s) for s in _STATUS.findall(result.stderr)]
        expected = block.expected_statuses()
        assert len(statuses) == len(expected), (where, statuses, expected)
        for n, (got, claimed) in enumerate(zip(statuses, expected, strict=True)):
            ok = got == claimed if claimed is not None else 200 <= got < 300
            assert ok, (where, f"call {n + 1}", got, claimed, result.stdout[-2000:])
