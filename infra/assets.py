"""Lambda assets without Docker: a handler plus the pure-Python part of smx_debug it imports.

Each asset is a directory holding ``handler.py`` (from ``lambdas/<dir>/``, :func:`smx_debug.contracts.handler_entry`;
the four action functions share ``lambdas/actions``) and ``smx_debug/__init__.py``, ``smx_debug/_lazy.py``,
``smx_debug/_json.py``, ``smx_debug/errors.py``, ``smx_debug/actions/**``: modules that import only boto3 and the
standard library, which the Lambda Python runtime provides. The directory is staged under the system temp folder,
keyed by a hash of its contents, so repeated synths reuse it and the CDK asset hash is stable.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from smx_debug.contracts import handler_entry
from smx_debug.errors import NotFoundError

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS_DIR = ROOT / "lambdas"
PACKAGE_DIR = ROOT / "src" / "smx_debug"

# What the Lambda runtime may import from the package: the standard-library-only subset.
_PACKAGE_FILES = ("__init__.py", "_lazy.py", "_json.py", "errors.py", "contracts.py", "tags.py", "py.typed")
_PACKAGE_TREES = ("actions",)


def asset_files(name: str, *, lambdas_dir: Path = LAMBDAS_DIR, package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Map each file of handler ``name``'s asset (relative POSIX path) to its source file.

    Raises:
        NotFoundError: ``lambdas/<dir>/handler.py`` does not exist.
    """
    handler_dir = lambdas_dir / handler_entry(name)[0]
    if not (handler_dir / "handler.py").is_file():
        raise NotFoundError(f"Lambda handler {name!r}: {handler_dir / 'handler.py'} does not exist")
    files: dict[str, Path] = {}
    for path in sorted(handler_dir.rglob("*")):
        if path.is_file() and _shipped(path):
            files[path.relative_to(handler_dir).as_posix()] = path
    for rel in _PACKAGE_FILES:
        if (package_dir / rel).is_file():
            files[f"smx_debug/{rel}"] = package_dir / rel
    for tree in _PACKAGE_TREES:
        for path in sorted((package_dir / tree).rglob("*")):
            if path.is_file() and _shipped(path):
                files[f"smx_debug/{path.relative_to(package_dir).as_posix()}"] = path
    return files


def stage_handler(
    name: str,
    *,
    lambdas_dir: Path = LAMBDAS_DIR,
    package_dir: Path = PACKAGE_DIR,
    staging_root: Path | None = None,
) -> Path:
    """Copy handler ``name``'s asset into a content-addressed directory and return it (one directory for the four
    action handlers: their files are the same)."""
    return stage_files(handler_entry(name)[0], asset_files(name, lambdas_dir=lambdas_dir, package_dir=package_dir), staging_root)


def stage_files(name: str, files: Mapping[str, Path], staging_root: Path | None = None) -> Path:
    """Copy ``files`` (relative POSIX path -> source) into ``<staging_root>/<name>-<content hash>`` and return it.

    The directory is keyed by the files' paths and bytes, so repeated synths reuse it and the CDK asset hash
    is stable. ``staging_root`` defaults to ``smx-debug-assets`` under the system temp folder.
    """
    digest = hashlib.sha256()
    for rel, src in files.items():
        digest.update(rel.encode() + b"\0" + src.read_bytes() + b"\0")
    root = staging_root or Path(tempfile.gettempdir()) / "smx-debug-assets"
    target = root / f"{name}-{digest.hexdigest()[:16]}"
    if (target / ".complete").is_file():
        return target
    # Stage beside the target and rename, so a concurrent synth never sees a half-written asset.
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    for rel, src in files.items():
        dest = work / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    (work / ".complete").touch()
    try:
        work.rename(target)
    except OSError:  # another process staged the same content first
        shutil.rmtree(work, ignore_errors=True)
    return target


def _shipped(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix not in {".pyc", ".pyo"} and not path.name.startswith(".")
