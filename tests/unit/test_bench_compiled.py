"""bench/compiled.py: the compiled copy it builds names modules of this checkout, and it never
replaces the checkout, a folder above it, or any folder it did not build."""

from __future__ import annotations

import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import compiled


@pytest.fixture
def no_build(monkeypatch):
    """A build would replace its target: these tests must stop before one, whatever happens."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("build() reached")
    monkeypatch.setattr(compiled, "build", refuse)


def test_every_module_it_compiles_is_a_module_of_the_package():
    # A module renamed or moved would otherwise be left out of the copy's compiled set silently.
    assert compiled.COMPILED, "nothing to compile"
    for name in compiled.COMPILED:
        assert (PROJECT_ROOT / "vaultgraph" / name).is_file(), name
    assert len(set(compiled.COMPILED)) == len(compiled.COMPILED)


@pytest.mark.parametrize("target", [PROJECT_ROOT, PROJECT_ROOT / "build" / "compiled",
                                    PROJECT_ROOT.parent, PROJECT_ROOT / ".."])
def test_it_refuses_the_checkout_what_is_in_it_and_what_is_above_it(target, no_build):
    with pytest.raises(SystemExit, match="outside this checkout"):
        compiled.main([str(target)])
    assert (PROJECT_ROOT / "vaultgraph" / "server.py").is_file()


def test_it_replaces_only_a_folder_it_built(tmp_path, no_build):
    kept = tmp_path / "someone's"
    kept.mkdir()
    (kept / "file").write_text("kept")
    with pytest.raises(SystemExit, match="replaces only a copy it built"):
        compiled.main([str(kept)])
    assert (kept / "file").read_text() == "kept"
    built_before = tmp_path / "built"
    built_before.mkdir()
    (built_before / compiled.MARKER).write_text("")
    compiled.refuse_target(built_before)  # no exit: a copy it built may be replaced
    compiled.refuse_target(tmp_path / "new")  # nor for a folder that does not exist


def test_a_chosen_set_of_modules_replaces_the_default_one_and_is_checked():
    assert compiled.modules({}) == compiled.COMPILED
    assert compiled.modules(
        {"BENCH_COMPILED_MODULES": " crypto.py, tokens/view.py ,crypto.py"}) == (
        "crypto.py", "tokens/view.py")
    for bad in ("crypto", "/etc/passwd.py", "../bench/run.py", "tokens/../../x.py"):
        with pytest.raises(SystemExit, match="not a module path"):
            compiled.modules({"BENCH_COMPILED_MODULES": f"crypto.py,{bad}"})
