"""A copy of this checkout with the request path's modules compiled by Cython:
`python -m bench.compiled <dir>` (default vaultgraph-compiled in the temporary
directory, /tmp/vaultgraph-compiled on Linux).

What compiling the service's own code would save, before anyone decides to ship it: the copy is
this checkout's committed tree (`git archive HEAD`), the modules of COMPILED turned into C by
Cython (as they are written, no type declarations added) and built with the C compiler this
Python was built with, each extension module beside its source. Python imports an extension
module before a source file of the same name, so the copy runs compiled wherever it is put
first on `PYTHONPATH`, which is what `HOTPATH_BASELINE=<dir>` does for bench/hotpath_ir.py and
bench/added_profile.py:

    python -m bench.compiled /tmp/vaultgraph-compiled
    HOTPATH_BASELINE=/tmp/vaultgraph-compiled python -m bench.hotpath_ir get create list

(under `vaultgraph neo4j run --`), the copy reported as "baseline".
BENCH_COMPILED_MODULES=<path,...> (paths under vaultgraph/) compiles those instead of COMPILED.
Needs Cython (`pip install -e '.[bench]'`) and a C compiler with Python's headers.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .config import ROOT
from .environment import say

# The modules every request runs through, and a page's and a batch's per-item code: the
# middlewares, dumping, presentation and masks, the statement wrapper and the token
# repository, crypto, the audit event and its writer, rate limits, logging and metrics.
COMPILED = (
    "api/middleware.py", "api/endpoints.py", "api/tokens.py", "api/loading.py",
    "tokens/view.py", "tokens/fields.py", "tokens/stored.py",
    "expressions/__init__.py", "expressions/filters.py", "expressions/bounds.py",
    "services/tokens.py", "services/ratelimits.py", "services/audit_writer.py",
    "repository/database.py", "repository/tokens.py", "repository/audit.py",
    "crypto.py", "audit/context.py", "audit/ids.py", "audit/event.py",
    "logging_setup.py", "metrics.py", "deadline.py", "auth/rules.py", "auth/principal.py",
)


def modules(environ=os.environ) -> tuple[str, ...]:
    """The modules to compile: BENCH_COMPILED_MODULES, else COMPILED; each one of the package."""
    names = tuple(n.strip() for n in environ.get("BENCH_COMPILED_MODULES", "").split(",")
                  if n.strip()) or COMPILED
    missing = [n for n in names if not (ROOT / "vaultgraph" / n).is_file()]
    if missing:
        sys.exit(f"BENCH_COMPILED_MODULES: not a module of vaultgraph/: {', '.join(missing)}")
    return names


def build(target: Path, names: tuple[str, ...] = COMPILED) -> list[Path]:
    """The committed tree at `target` (replaced), `names` built in it; the modules built."""
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit("bench.compiled needs Cython: pip install -e '.[bench]'")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, stdout=archive,  # noqa: S607
                       check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(target, filter="data")
    sources = [target / "vaultgraph" / name for name in names]
    say(f"cythonizing {len(sources)} modules")
    cythonize([str(s) for s in sources], language_level=3, quiet=True, nthreads=2)
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    flags = ["-shared", "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")

    def compile_one(source: Path) -> Path:
        built = source.with_suffix("").with_name(source.stem + suffix)
        subprocess.run(  # noqa: S603 - this Python's own compiler on files this module wrote
            [*compiler, *flags, str(source.with_suffix(".c")), "-o", str(built)], check=True)
        return built

    say(f"compiling them with {compiler[0]}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(compile_one, sources))


def main(argv: list[str]) -> None:
    target = Path(argv[0] if argv else Path(tempfile.gettempdir(), "vaultgraph-compiled"))
    target = target.resolve()
    if target == ROOT or ROOT in target.parents:
        sys.exit("bench.compiled builds a copy outside this checkout")
    built = build(target, modules())
    say(f"{len(built)} modules compiled in {target}; measure it with "
        f"HOTPATH_BASELINE={target} python -m bench.hotpath_ir <workload ...>")


if __name__ == "__main__":
    main(sys.argv[1:])
