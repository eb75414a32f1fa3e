"""Maps the design card's top-level folders into the ``alpharl`` namespace.

``cuda_kernels/`` installs as ``alpharl.cuda_kernels``, ``cli/`` as
``alpharl.cli`` and ``data/`` (the embedded LOBSTER sample) as
``alpharl.data``, so no generic top-level name lands in site-packages.
Everything else lives in pyproject.toml.
"""
from setuptools import find_packages, setup

FOLDERS = {"alpharl": "alpharl", "alpharl.cuda_kernels": "cuda_kernels", "alpharl.cli": "cli"}

packages, package_dir = [], {}
for name, folder in FOLDERS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]
package_dir["alpharl.data"] = "data"
packages.append("alpharl.data")

setup(packages=packages, package_dir=package_dir)
