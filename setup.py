"""Package layout (metadata is in pyproject.toml): the stages keep their folders at the repository root and are
installed under the one `failatlas` namespace (`failatlas.cluster` from `cluster/`, ...). Nothing else becomes a
top-level module: `app.py` stays the Streamlit script of a clone, the installed app is `failatlas.appdata.main`."""

from setuptools import find_packages, setup

STAGES = ("bench_core", "ingest", "embed", "cluster", "taxonomy")

package_dir = {"failatlas": "failatlas"}
packages = find_packages(include=["failatlas", "failatlas.*"])
for stage in STAGES:
    package_dir[f"failatlas.{stage}"] = stage
    packages += [f"failatlas.{name}" for name in find_packages(include=[stage, f"{stage}.*"])]

setup(packages=packages, package_dir=package_dir)
