"""The package list, found under each folder of pyproject.toml's package-dir.

pyproject.toml alone cannot name the packages of a folder installed under another name (its
`find` names them after the folder), so this file finds them: albert_tf/ as `albert_tf`,
preprocess/ as `albert_tf.preprocess`, export/ as `albert_tf.export`, and their subpackages.
Everything else about the project is in pyproject.toml.
"""

from setuptools import find_packages, setup
from setuptools.config.pyprojecttoml import load_file

FOLDERS: dict[str, str] = load_file("pyproject.toml")["tool"]["setuptools"]["package-dir"]

setup(
    packages=[
        ".".join(filter(None, (name, subpackage)))
        for name, folder in FOLDERS.items()
        for subpackage in ("", *find_packages(folder))
    ]
)
