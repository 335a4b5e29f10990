"""The hook under DistributedDataParallel: two CPU processes with gloo, workers named by rank."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hook_support import Net
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import smx_debug.hook as smd


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(rank: int, folder: str, include_workers: str) -> dict[str, object]:
    torch.manual_seed(0)
    model = Net()
    sink = smd.MemorySink()
    hook = smd.Hook(out_dir=f"{folder}/out-{include_workers}", save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients", "losses"], include_workers=include_workers,
                    sink=sink)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)  # each rank its own data: gradients differ before all-reduce
    for _ in range(3):
        opt.zero_grad()
        loss_fn(ddp(torch.randn(4, 4, generator=gen)), torch.randint(0, 3, (4,), generator=gen)).backward()
        opt.step()
    hook.close()
    return {"worker": hook._worker, "num_workers": sink.num_workers, "steps": [s.step for s in sink.steps],
            "grad": sink.tensor("gradient/Net_fc1.weight", 2).tolist() if sink.steps else None}


def _worker(rank: int, folder: str, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        result = {mode: _run(rank, folder, mode) for mode in ("all", "one")}
        Path(folder, f"rank{rank}.json").write_text(json.dumps(result))
        dist.barrier()  # neither rank tears gloo down while the other still uses it
    finally:
        dist.destroy_process_group()


def test_hook_ddp_workers_named_by_rank_gradients_all_reduced(tmp_path: Path) -> None:
    mp.start_processes(_worker, args=(str(tmp_path), _free_port()), nprocs=2, start_method="spawn")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    every, chief = [r["all"] for r in ranks], [r["one"] for r in ranks]
    assert [r["worker"] for r in every] == ["worker_0", "worker_1"]
    assert every[0]["steps"] == every[1]["steps"] == [0, 2]
    assert every[0]["num_workers"] == 2
    np.testing.assert_allclose(every[0]["grad"], every[1]["grad"])  # read after DDP's all-reduce
    assert chief[0]["steps"] == [0, 2]
    assert chief[1]["steps"] == []  # smdebug's default include_workers="one": only the chief writes
