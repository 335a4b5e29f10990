"""The evaluator's Lambda code, built without Docker: a small code directory plus a dependency layer of wheels.

The evaluation needs numpy, pandas, pydantic, (for Debugger profiler output, read by the one reader in
``smx_debug.data``) pyarrow and (for the tensor rules, read by ``smx_debug.tensors``) protobuf and
google-crc32c, none of which the Lambda Python runtime has. We fetch the Lambda platform's
manylinux wheels from PyPI with ``pip download --only-binary=:all: --platform ... --python-version ...`` at the
versions pinned in ``constraints.txt``, unpack them into a layer (``python/`` at its root, as Lambda expects),
drop what a running program never imports (test suites, C headers, Cython sources) and zip it once. Wheels and
the zip are cached under ``~/.cache/smx-debug`` (``SMX_DEBUG_CACHE``), keyed by their content, so a synth after
the first needs no network (the fleet collector runs on the same layer: only ``evaluator=false`` *and*
``fleet=false``, or ``local=true``, synthesize without it). Lambda allows 250 MB unzipped for a function and its layers: the build fails with
a ConfigError if the layer would not fit.

Why not the AWS SDK for pandas managed layer: its ARN differs per region and partition (the stack targets aws-cn
too), it lags new Python runtimes, and it cannot be imported in a test here; these wheels can (see
tests/functional/watch/test_watch_lambda_asset.py, which builds the same layer for this machine's platform).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from infra.assets import stage_files
from smx_debug.contracts import handler_entry
from smx_debug.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "src" / "smx_debug"
LAMBDA_LIMIT_BYTES = 250 * 1024 * 1024
# Third-party distributions the evaluator imports (beyond boto3, which the runtime has), pinned in constraints.txt.
LAYER_PACKAGES = (
    "numpy", "pandas", "pyarrow", "python-dateutil", "six", "pydantic", "pydantic-core", "typing-extensions",
    "annotated-types", "typing-inspection",
    "protobuf", "google-crc32c",  # smx_debug.tensors: the tensor rules read jobs' Debugger event files
    "tqdm",  # smx_debug.data's readers show their progress with it (silent in Lambda: no terminal)
)
# The package's parts the evaluator never imports (the local AWS needs moto; the CLI, the simulator and the
# HTML report are for people). htmlreport/instances.json is kept: the evaluator reads the instance table.
_SKIP_PACKAGES = ("local", "cli", "simulate", "htmlreport")
_KEEP_FILES = ("htmlreport/instances.json",)
_STRIP_DIRS = {"tests", "include", "__pycache__"}
_STRIP_SUFFIXES = {".pyx", ".pxd", ".pxi", ".h", ".hpp", ".c", ".cpp", ".pyc"}
_STRIP_VERSION = "1"  # bump when the strip rules change (part of the layer's cache key)


@dataclass(frozen=True)
class Target:
    """A Lambda platform: pip's ``--platform`` tags (most specific first) and the Python version (``3.14``)."""

    platforms: tuple[str, ...]
    python: str

    @property
    def key(self) -> str:
        return f"py{self.python}-{self.platforms[0]}"


# RUNTIME and architecture of infra/components/evaluator.py: Python 3.14 on arm64 (Amazon Linux 2023, glibc 2.34).
LAMBDA_TARGET = Target(
    platforms=("manylinux_2_34_aarch64", "manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"),
    python="3.14",
)


def host_target() -> Target:
    """This machine's platform (for a test that imports the layer here)."""
    machine = sysconfig.get_platform().split("-", 1)[-1].replace("-", "_")  # e.g. x86_64
    return Target(
        platforms=(f"manylinux_2_28_{machine}", f"manylinux_2_17_{machine}", f"manylinux2014_{machine}"),
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
    )


def _cache_root() -> Path:
    return Path(os.environ.get("SMX_DEBUG_CACHE") or Path.home() / ".cache" / "smx-debug")


def _pins(constraints: Path = ROOT / "constraints.txt") -> list[str]:
    found: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and name.lower().replace("_", "-") in LAYER_PACKAGES:
            found[name.lower().replace("_", "-")] = f"{name}=={version.split(';')[0].strip()}"
    missing = [p for p in LAYER_PACKAGES if p not in found]
    if missing:
        raise ConfigError(f"constraints.txt pins no version of {missing}", field="constraints.txt", value=missing)
    return [found[p] for p in LAYER_PACKAGES]


def _download(target: Target, pins: list[str]) -> list[Path]:
    wheels_dir = _cache_root() / "wheels" / target.key
    wheels_dir.mkdir(parents=True, exist_ok=True)
    marker = wheels_dir / (hashlib.sha256("\n".join(pins).encode()).hexdigest()[:16] + ".complete")
    if not marker.is_file():
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", target.python,
            *[arg for p in target.platforms for arg in ("--platform", p)], "--dest", str(wheels_dir), *pins,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ConfigError(
                f"evaluator layer: pip could not fetch the {target.key} wheels ({done.stderr.strip()[-500:]}); "
                "the scheduled evaluator and the fleet collector need PyPI once (then cached; "
                "python -m infra.evaluator_asset fills the cache ahead), or synthesize without both: "
                "-c evaluator=false -c fleet=false (or -c local=true, for the local AWS)",
                field="evaluator.enabled",
                value=True,
            )
        marker.write_text("\n".join(pins))
    wanted = {(_norm(p.split("==")[0]), p.split("==")[1]) for p in pins}
    wheels = sorted(w for w in wheels_dir.glob("*.whl") if (_norm(w.name.split("-")[0]), w.name.split("-")[1]) in wanted)
    if len(wheels) != len(wanted):
        raise ConfigError(f"evaluator layer: {len(wheels)} wheels in {wheels_dir} for {len(wanted)} pins",
                          field="evaluator.enabled", value=True)
    return wheels


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _stripped(name: str) -> bool:
    parts = name.split("/")
    return any(p in _STRIP_DIRS for p in parts[:-1]) or Path(name).suffix in _STRIP_SUFFIXES


def build_layer(target: Target = LAMBDA_TARGET) -> Path:
    """The dependency layer zip for ``target`` (built once per content, then taken from the cache).

    Raises:
        ConfigError: the wheels cannot be fetched, or the unzipped layer exceeds Lambda's 250 MB.
    """
    pins = _pins()
    wheels = _download(target, pins)
    digest = hashlib.sha256(_STRIP_VERSION.encode())
    for wheel in wheels:
        digest.update(wheel.name.encode() + b"\0" + str(wheel.stat().st_size).encode())
    out = _cache_root() / "layers" / f"evaluator-{target.key}-{digest.hexdigest()[:16]}.zip"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    fd, tmp = tempfile.mkstemp(prefix=".layer-", suffix=".zip", dir=out.parent)
    os.close(fd)
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as layer:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as source:
                for info in source.infolist():
                    name = info.filename
                    head, _, rest = name.partition("/")
                    if head.endswith(".data"):  # <dist>.data/purelib|platlib/... install at the root
                        kind, _, inner = rest.partition("/")
                        if kind not in ("purelib", "platlib"):
                            continue
                        name = inner
                    if info.is_dir() or _stripped(name):
                        continue
                    total += info.file_size
                    zinfo = zipfile.ZipInfo(f"python/{name}", date_time=(2020, 1, 1, 0, 0, 0))
                    zinfo.external_attr = info.external_attr
                    zinfo.compress_type = zipfile.ZIP_DEFLATED
                    layer.writestr(zinfo, source.read(info))
    if total > LAMBDA_LIMIT_BYTES - 5 * 1024 * 1024:
        os.unlink(tmp)
        raise ConfigError(
            f"evaluator layer for {target.key}: {total / 2**20:.0f} MB unzipped, over Lambda's 250 MB with the code",
            field="evaluator", value=total,
        )
    os.replace(tmp, out)
    return out


def unzipped_size(layer_zip: Path) -> int:
    """Bytes the layer takes once Lambda unzips it."""
    with zipfile.ZipFile(layer_zip) as archive:
        return sum(i.file_size for i in archive.infolist())


def stage_evaluator_code(*, handler: str = "evaluator", staging_root: Path | None = None) -> Path:
    """A function's code directory: ``lambdas/<handler>/handler.py`` and the package without the parts it never
    imports. The evaluator and the fleet collector share it (and the layer)."""
    files: dict[str, Path] = {"handler.py": ROOT / "lambdas" / handler_entry(handler)[0] / "handler.py"}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in {".pyc", ".pyo"}:
            continue
        if rel.split("/", 1)[0] in _SKIP_PACKAGES and rel not in _KEEP_FILES:
            continue
        files[f"smx_debug/{rel}"] = path
    return stage_files(handler, files, staging_root)


def main() -> int:
    """``python -m infra.evaluator_asset``: fill the cache ahead (the first synth would), e.g. before going offline."""
    layer = build_layer(LAMBDA_TARGET)
    print(f"evaluator layer for {LAMBDA_TARGET.key}: {layer} ({unzipped_size(layer) / 2**20:.0f} MB unzipped); "
          f"wheels in {_cache_root() / 'wheels' / LAMBDA_TARGET.key}: synth now needs no network")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
