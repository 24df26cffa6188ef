"""Every operator's TileLang kernels: importing this registers them with the
tilelang backend (python/operator_runtime/tilelang/registry.py), which imports
it on first use. An operator's kernels live in ops/<op>/tilelang/<op>.py; the
operators are the folders of ops/ that have one."""

import importlib
import pathlib

for _folder in sorted(pathlib.Path(__file__).parent.iterdir()):
    if (_folder / "tilelang" / f"{_folder.name}.py").is_file():
        importlib.import_module(f"ops.{_folder.name}.tilelang.{_folder.name}")
