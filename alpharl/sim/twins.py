"""Kernel modules executed again as new modules ("twins"), so their device functions compile
for another purpose from the one source: the CPU build (alpharl.sim.cpu: ``cuda.jit(device=True)``
stands for ``njit``) and the step kernels specialized on a feature set (alpharl.sim.variants: the
switches module replaced).

A twin is the module's source run in a fresh module: its imports of sibling kernel modules bind
the siblings' twins, and the names in ``bound`` are preset and dropped from its import lines."""
from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path
from typing import Callable

#: The package whose modules are twinned.
KERNEL_PACKAGE = "alpharl.cuda_kernels.lobsim"


def _twin(name: str, prefix: str, twins: dict, bound: dict) -> types.ModuleType:
    src_module = importlib.import_module(f"{KERNEL_PACKAGE}.{name}")
    path = Path(src_module.__file__)
    tree = ast.parse(path.read_text(), str(path))
    module = types.ModuleType(f"{prefix}.{name}", src_module.__doc__)
    module.__dict__.update(bound)
    body = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(KERNEL_PACKAGE + "."):
            twin = twins[node.module.rsplit(".", 1)[1]]
            for a in node.names:
                module.__dict__[a.asname or a.name] = getattr(twin, a.name)
            continue
        if isinstance(node, ast.ImportFrom):
            node.names = [a for a in node.names if (a.asname or a.name) not in bound]
            if not node.names:
                continue
        body.append(node)
    tree.body = body
    # compiled under the source's own file name: tracebacks and Numba's cache locate the source
    exec(compile(tree, str(path), "exec"), module.__dict__)
    return module


def twin_modules(names, prefix: str, given: dict | None = None, bound: dict | None = None,
                 finish: Callable[[types.ModuleType], None] | None = None) -> dict:
    """The twins of the kernel modules ``names`` (in import order: each imports only those before
    it and ``given``), named ``prefix.name``. ``given``: modules that stand for kernel modules of
    their names (not executed); ``bound``: names preset in every twin; ``finish``: called on each
    twin before the next one is made."""
    twins = dict(given or {})
    for name in names:
        twins[name] = _twin(name, prefix, twins, dict(bound or {}))
        if finish is not None:
            finish(twins[name])
    return twins
