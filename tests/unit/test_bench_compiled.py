"""bench/compiled.py: the compiled copy it builds names modules of this checkout, and never
overwrites the checkout itself."""

from __future__ import annotations

import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import compiled


def test_every_module_it_compiles_is_a_module_of_the_package():
    # A module renamed or moved would otherwise be left out of the copy's compiled set silently.
    assert compiled.COMPILED, "nothing to compile"
    for name in compiled.COMPILED:
        assert (PROJECT_ROOT / "vaultgraph" / name).is_file(), name
    assert len(set(compiled.COMPILED)) == len(compiled.COMPILED)


@pytest.mark.parametrize("target", [PROJECT_ROOT, PROJECT_ROOT / "build" / "compiled"])
def test_it_refuses_to_build_inside_the_checkout(target):
    # build() replaces its target: inside the checkout that would delete the working tree.
    with pytest.raises(SystemExit, match="outside this checkout"):
        compiled.main([str(target)])
    assert (PROJECT_ROOT / "vaultgraph" / "server.py").is_file()


def test_a_chosen_set_of_modules_replaces_the_default_one_and_is_checked():
    assert compiled.modules({}) == compiled.COMPILED
    assert compiled.modules({"BENCH_COMPILED_MODULES": " crypto.py, tokens/view.py "}) == (
        "crypto.py", "tokens/view.py")
    with pytest.raises(SystemExit, match=r"tokens/nowhere\.py"):
        compiled.modules({"BENCH_COMPILED_MODULES": "crypto.py,tokens/nowhere.py"})
