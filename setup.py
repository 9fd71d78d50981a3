"""Packaging beyond pyproject.toml: the top-level ``conf/`` folder ships as the package ``jaxassoc.conf``."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["jaxassoc*"]), "jaxassoc.conf"], package_dir={"jaxassoc.conf": "conf"})
