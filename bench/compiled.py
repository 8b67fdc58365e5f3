"""A copy of this checkout with the request path's modules compiled by Cython:
`python -m bench.compiled <dir>` (default vaultgraph-compiled in the temporary
directory, /tmp/vaultgraph-compiled on Linux).

What compiling the service's own code would save, before anyone decides to ship it: the copy is
this checkout's committed tree (`git archive HEAD`), the modules of COMPILED turned into C by
Cython (as they are written, no type declarations added) and built with the compiler and
flags this Python was built with, each extension module beside its source. Python imports an
extension module before a source file of the same name, so the copy runs compiled wherever it
is put first on `PYTHONPATH`, which is what `HOTPATH_BASELINE=<dir>` does for bench/hotpath_ir.py
(and `BENCH_DEFAULTS_AB_BASELINE=<dir>` for bench/defaults_ab.py, under load):

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


# Left in a copy this module built: only such a folder is ever replaced.
MARKER = ".bench-compiled"


def modules(environ=os.environ) -> tuple[str, ...]:
    """The modules to compile: BENCH_COMPILED_MODULES, else COMPILED. Each must be a `.py`
    path under vaultgraph/, named once; whether the committed tree holds it is checked when
    the copy is made."""
    names = tuple(dict.fromkeys(
        n.strip() for n in environ.get("BENCH_COMPILED_MODULES", "").split(",") if n.strip()))
    bad = [n for n in names if not n.endswith(".py") or Path(n).is_absolute()
           or ".." in Path(n).parts]
    if bad:
        sys.exit(f"BENCH_COMPILED_MODULES: not a module path under vaultgraph/: {', '.join(bad)}")
    return names or COMPILED


def refuse_target(target: Path) -> None:
    """Exit unless `target` may be made or replaced: outside the checkout (neither in it nor
    above it), and either absent or a copy this module built before."""
    target = target.resolve()
    if target == ROOT or ROOT in target.parents or target in ROOT.parents:
        sys.exit("bench.compiled builds a copy outside this checkout, not in it or above it")
    if target.exists() and not (target / MARKER).is_file():
        sys.exit(f"bench.compiled replaces only a copy it built ({target} has no {MARKER}); "
                 "name a new folder")


def build(target: Path, names: tuple[str, ...] = COMPILED) -> list[Path]:
    """The committed tree at `target` (made, or replaced when this module built it), `names`
    built in it with this Python's own compiler flags; the extension modules built."""
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit("bench.compiled needs Cython: pip install -e '.[bench]'")
    target = target.resolve()
    refuse_target(target)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / MARKER).write_text("a copy built by python -m bench.compiled\n")
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, stdout=archive,  # noqa: S607
                       check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                tar.extractall(target, filter="data")
            else:  # this checkout's own archive
                tar.extractall(target)  # noqa: S202
    sources = [target / "vaultgraph" / name for name in names]
    missing = [n for n, source in zip(names, sources, strict=True) if not source.is_file()]
    if missing:
        sys.exit(f"not a module of the committed vaultgraph/: {', '.join(missing)}")
    say(f"cythonizing {len(sources)} modules")
    cythonize([str(s) for s in sources], language_level=3, quiet=True, nthreads=2)
    # As setuptools builds an extension for this Python: its compiler, flags (-DNDEBUG, -O3)
    # and linker.
    config = sysconfig.get_config_var
    compile_cmd = [*shlex.split(config("CC") or "cc"), *shlex.split(config("CFLAGS") or ""),
                   *shlex.split(config("CCSHARED") or ""), f"-I{sysconfig.get_paths()['include']}"]
    link_cmd = shlex.split(config("LDSHARED") or "cc -shared")
    suffix = config("EXT_SUFFIX")

    def compile_one(source: Path) -> Path:
        c_file, o_file = source.with_suffix(".c"), source.with_suffix(".o")
        built = source.with_name(source.stem + suffix)
        # This Python's own compiler and linker, on files this module wrote.
        for argv in ([*compile_cmd, "-c", str(c_file), "-o", str(o_file)],
                     [*link_cmd, str(o_file), "-o", str(built)]):
            subprocess.run(argv, check=True)  # noqa: S603
        return built

    say(f"compiling them with {compile_cmd[0]}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(compile_one, sources))


def main(argv: list[str]) -> None:
    target = Path(argv[0] if argv else Path(tempfile.gettempdir(), "vaultgraph-compiled"))
    names = modules()
    refuse_target(target)
    built = build(target, names)
    say(f"{len(built)} modules compiled in {target.resolve()}; measure it with "
        f"HOTPATH_BASELINE={target.resolve()} python -m bench.hotpath_ir <workload ...>")


if __name__ == "__main__":
    main(sys.argv[1:])
