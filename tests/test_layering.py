"""Kernels import only leaf modules (SPEC: layering).

A kernel module may import numba, numpy, math, other kernel modules and a short
list of host *leaf* modules: modules with no package side effects that import
no other alpharl module outside that list. Two checks: a static one over the
sources (every ``import`` of an alpharl module in ``cuda_kernels/`` and in the
leaves themselves names an allowed module) and a dynamic one (importing every
kernel module in a fresh process loads none of the heavy host packages).
"""
import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import alpharl.cuda_kernels as kernels_pkg

#: The host modules a kernel module may import (each imports only these, numba and numpy).
LEAVES = frozenset({
    "alpharl",             # the package itself: picks the numba target (alpharl.target) and nothing else
    "alpharl.target",
    "alpharl.isv",
    "alpharl.sizes",
    "alpharl.actions",
    "alpharl.prng",
    "alpharl.sim",         # docstring only
    "alpharl.sim.layout",
    "alpharl.lobster",     # docstring only
    "alpharl.lobster.format",
})
KERNEL_PREFIX = "alpharl.cuda_kernels"
#: Never loaded by importing a kernel module.
FORBIDDEN = ("pyarrow", "rich", "typer", "alpharl.trainer", "alpharl.run", "alpharl.cli")

_KERNELS_DIR = Path(kernels_pkg.__file__).resolve().parent
_ALPHARL_DIR = Path(sys.modules["alpharl"].__file__).resolve().parent


def _module_file(name: str) -> Path | None:
    """Source file of an alpharl module name (None when it is not a module: an attribute)."""
    parts = name.split(".")
    if parts[:2] == ["alpharl", "cuda_kernels"]:
        base, rest = _KERNELS_DIR, parts[2:]
    else:
        base, rest = _ALPHARL_DIR, parts[1:]
    path = base.joinpath(*rest)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack += node.orelse
        else:
            stack += ast.iter_child_nodes(node)


def _alpharl_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every alpharl module ``path`` imports at run time, at any depth of the file."""
    found = []
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "alpharl"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "alpharl":
            found.append((node.lineno, node.module))
            # ``from alpharl.sim import layout`` imports the submodule alpharl.sim.layout.
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if _module_file(f"{node.module}.{a.name}") is not None]
    return found


def _allowed(name: str) -> bool:
    return name in LEAVES or name == KERNEL_PREFIX or name.startswith(KERNEL_PREFIX + ".")


def test_kernels_and_leaves_import_only_leaves():
    files = sorted(_KERNELS_DIR.rglob("*.py")) + [_module_file(m) for m in sorted(LEAVES)]
    bad = [f"{path}:{line}: imports {name}" for path in files for line, name in _alpharl_imports(path)
           if not _allowed(name)]
    assert not bad, "\n".join(bad)


def test_leaf_list_names_real_modules():
    assert all(_module_file(m) is not None for m in LEAVES)


def test_importing_every_kernel_module_loads_no_heavy_package():
    names = [info.name for info in pkgutil.walk_packages(kernels_pkg.__path__, prefix=KERNEL_PREFIX + ".")]
    assert len(names) > 20
    code = ("import importlib, json, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = json.loads(proc.stdout.splitlines()[-1])
    heavy = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not heavy, heavy
    host = [m for m in loaded if m.startswith("alpharl") and not _allowed(m)]
    assert not host, host


def test_every_simulator_switch_in_the_kernels_is_documented():
    """Kernel modules switch on the simulator only through alpharl.target's documented switches,
    each named once; every documented switch is used (the GPU runs the other side of each)."""
    from alpharl import target

    used, raw = [], []
    for path in sorted(_KERNELS_DIR.rglob("*.py")):
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("sim_override", "gpu_or_sim"):
                    used.append(node.args[0].value)
                elif node.func.attr == "on_simulator":
                    raw.append(f"{path}:{node.lineno}")
    assert not raw, raw
    assert sorted(used) == sorted(target.SIM_OVERRIDES), used
    assert all(len(why) > 20 for why in target.SIM_OVERRIDES.values())
