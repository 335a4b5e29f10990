"""Generate smx-debug's instance table (src/smx_debug/htmlreport/instances.json) from saved AWS data.

Offline, from the files in ``tools/instances/source/`` (each says where it came from and when; INDEX.md lists
them)::

    python tools/instances/generate.py                # rewrite the committed table
    python tools/instances/generate.py --out x.json   # write elsewhere (tests compare it with the committed one)

Refreshing a source file needs that source on this machine, never the network at generation time::

    python tools/instances/generate.py --extract-botocore             # installed botocore's TrainingInstanceType
    python tools/instances/generate.py --extract-sagemaker-sdk        # installed sagemaker's instance_gpu_info.json
    python tools/instances/generate.py --extract-hyperpod FILE --from "aws/sagemaker-hyperpod-cli@<commit> (date)"
    python tools/instances/generate.py --extract-gpu-data FILE --from "vantage-sh/ec2instances.info@<commit> (date)"

Every value of a row comes from a source; a value no source gives is ``null`` (a price) or, for vCPUs only, taken
from the size in the type's name (AWS sizes: 2 vCPUs per ``large``, 4 per ``xlarge``) and listed in the row's
``derived``. Run with the project's virtualenv (it imports ``smx_debug.instances``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from smx_debug.instances import vcpus_from_size

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "source"
OUT = HERE.parents[1] / "src" / "smx_debug" / "htmlreport" / "instances.json"

BOTOCORE = "botocore_training_instance_types.json"
HYPERPOD = "hyperpod_instance_resources.json"
SDK_GPU = "sagemaker_sdk_instance_gpu_info_us_east_1.json"
GPU_DATA = "ec2instances_gpu_data.json"
NEURON = "neuron_instances.json"
PRICES = "sagemaker_training_prices.json"
ACCELERATED = re.compile(r"ml\.(p|g|trn|inf)\d")


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SOURCE / name).read_text())
    return data


def _save(name: str, origin: str, as_of: str, data: dict[str, Any]) -> None:
    doc = {"from": origin, "as_of": as_of, "data": data}
    (SOURCE / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SOURCE / name} ({len(data)} entries)")


def _gpu_model(name: str) -> str:
    for noise in ("NVIDIA ", "Tesla ", " Tensor Core"):
        name = name.replace(noise, "")
    return name.strip()


def build() -> dict[str, Any]:
    """The table from the saved sources."""
    sources = {n: _load(n) for n in (BOTOCORE, HYPERPOD, SDK_GPU, GPU_DATA, NEURON, PRICES)}
    types: list[str] = sources[BOTOCORE]["data"]["TrainingInstanceType"]
    hyperpod, sdk = sources[HYPERPOD]["data"], sources[SDK_GPU]["data"]
    gpu_data, neuron, prices = sources[GPU_DATA]["data"], sources[NEURON]["data"], sources[PRICES]["data"]
    rows: dict[str, dict[str, Any]] = {}
    conflicts: list[str] = []
    for t in sorted(types, key=lambda s: (s.split(".")[1], vcpus_from_size(s) or 0, s)):
        hp, sd, gd = hyperpod.get(t), sdk.get(t), gpu_data.get(t.removeprefix("ml."))
        nr, pr = neuron.get(t), prices.get(t)
        derived: list[str] = []
        vcpus = (hp or {}).get("cpu") or (nr or {}).get("vcpus") or (pr or {}).get("vcpus")
        if not vcpus:
            vcpus = vcpus_from_size(t)
            derived.append("vcpus")
        memory = (hp or {}).get("memory") or (nr or {}).get("memory_gib")
        gpus = (hp or {}).get("gpu") if hp else (sd or {}).get("Count", gd["gpuCount"] if gd else 0)
        gpus = int(gpus or 0)
        if gd and gpus and int(gd["gpuCount"]) != gpus:
            conflicts.append(f"{t}: {gpus} GPUs (AWS) against {gd['gpuCount']} (ec2instances.info); AWS kept")
        trainium = int((hp or {}).get("trainium") or (nr or {}).get("devices") or 0)
        gpu_memory: float | None = None
        if gpus and sd:
            gpu_memory = round(sd["TotalGpuMemoryInMiB"] / 1024, 1)
        elif gpus and gd:
            gpu_memory = round(float(gd["gpuMemory"]) / float(gd["gpuCount"]) * gpus, 1)
        row = {
            "price": (pr or {}).get("price"),
            "vcpus": int(vcpus) if vcpus else None,
            "memory_gib": memory,
            "gpus": gpus,
            "gpu_model": _gpu_model(gd["gpuModel"]) if gpus and gd else (pr or {}).get("gpu_model") if gpus else None,
            "gpu_memory_gib": gpu_memory,
            "trainium": trainium,
            "trainium_model": (nr or {}).get("model") if trainium else None,
            "derived": derived,
        }
        if ACCELERATED.match(t) and not (gpus or trainium):
            raise SystemExit(f"{t}: an accelerated type with no accelerator in any source; add it to a source file")
        rows[t] = row
    priced = sum(r["price"] is not None for r in rows.values())
    return {
        "source": ("SageMaker training instance types from botocore's service model; vCPUs, memory, GPUs and "
                   "Trainium chips from AWS's published data (sagemaker-hyperpod-cli, the SageMaker Python SDK, "
                   "the AWS Neuron documentation), GPU models from ec2instances.info; on-demand training prices, "
                   f"US East (N. Virginia), USD per instance-hour, where known ({priced} of {len(rows)})"),
        "url": "https://aws.amazon.com/sagemaker/pricing/",
        "as_of": max(s["as_of"] for s in sources.values()),
        "generator": "tools/instances/generate.py (offline, from tools/instances/source/)",
        "sources": [{"file": f"tools/instances/source/{n}", "from": s["from"], "as_of": s["as_of"]}
                    for n, s in sources.items()],
        "note": ("price null: no source gave a price; pass --price. derived: a field taken from the size in the "
                 "type's name. gpus: NVIDIA GPUs (CloudWatch's GPUUtilization sums over them); trainium: AWS "
                 "Trainium chips. The ml.p3 prices reproduce the published Horovod case (3 x ml.p3.8xlarge for "
                 "503 s = $6.16; 2 x ml.p3.2xlarge for 502 s = $1.07)."),
        "conflicts": conflicts,
        "instances": rows,
    }


def render(table: dict[str, Any]) -> str:
    """One row per line, so a refresh's diff shows what changed."""
    head = {k: v for k, v in table.items() if k != "instances"}
    lines = [json.dumps(head, indent=2)[:-2] + ",", '  "instances": {']
    items = list(table["instances"].items())
    for i, (name, row) in enumerate(items):
        lines.append(f"    {json.dumps(name)}: {json.dumps(row)}" + ("," if i < len(items) - 1 else ""))
    return "\n".join([*lines, "  }", "}"]) + "\n"


def _extract_botocore() -> None:
    import botocore
    import botocore.session

    enum = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingInstanceType").enum
    _save(BOTOCORE, f"botocore {botocore.__version__}, data/sagemaker service model, shape TrainingInstanceType",
          _today(), {"TrainingInstanceType": list(enum)})


def _extract_sdk() -> None:
    import sagemaker  # type: ignore[import-untyped]

    path = Path(sagemaker.__file__).parent / "image_uri_config" / "instance_gpu_info.json"
    data = json.loads(path.read_text())["us-east-1"]
    _save(SDK_GPU, f"sagemaker {sagemaker.__version__} (PyPI), image_uri_config/instance_gpu_info.json, us-east-1",
          _today(), data)


def _extract_hyperpod(path: Path, origin: str) -> None:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "INSTANCE_RESOURCES":
            _save(HYPERPOD, origin, _date_in(origin), ast.literal_eval(node.value))
            return
    raise SystemExit(f"{path}: no INSTANCE_RESOURCES")


def _extract_gpu_data(path: Path, origin: str) -> None:
    data = {}
    for m in re.finditer(r'"([a-z0-9-]+\.[a-z0-9-]+)":\s*\{(.*?)\}', path.read_text(), re.S):
        fields = dict(re.findall(r'(\w+):\s*("[^"]*"|[0-9.]+)', m.group(2)))
        data[m.group(1)] = {k: json.loads(v) if v.startswith('"') else float(v) for k, v in fields.items()}
    _save(GPU_DATA, origin, _date_in(origin), data)


def _today() -> str:
    import datetime

    return datetime.date.today().isoformat()


def _date_in(origin: str) -> str:
    m = re.search(r"\d{4}-\d{2}-\d{2}", origin)
    if not m:
        raise SystemExit(f"--from {origin!r}: give the source's date (YYYY-MM-DD)")
    return m.group(0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--extract-botocore", action="store_true")
    p.add_argument("--extract-sagemaker-sdk", action="store_true")
    p.add_argument("--extract-hyperpod", type=Path)
    p.add_argument("--extract-gpu-data", type=Path)
    p.add_argument("--from", dest="origin", default="")
    args = p.parse_args(argv)
    if args.extract_botocore:
        _extract_botocore()
    if args.extract_sagemaker_sdk:
        _extract_sdk()
    if args.extract_hyperpod:
        _extract_hyperpod(args.extract_hyperpod, args.origin)
    if args.extract_gpu_data:
        _extract_gpu_data(args.extract_gpu_data, args.origin)
    table = build()
    args.out.write_text(render(table))
    for line in table["conflicts"]:
        print(f"conflict: {line}", file=sys.stderr)
    print(f"wrote {args.out}: {len(table['instances'])} types, "
          f"{sum(r['price'] is not None for r in table['instances'].values())} priced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
