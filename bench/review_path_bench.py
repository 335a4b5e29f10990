"""The recommended profile on the reviewer's path, on architectures no other benchmark uses.

Each run is written by ``smx_debug.hook`` from a plan with ``profile: recommended`` (``Hook.from_plan``: the hook
saves the statistics, the loss means and the labels by itself) and judged by ``smx-debug rules evaluate TRIAL --plan
plan.yaml --json -``, as issue 30's review does. Seven architectures (a CNN with BatchNorm, a plain CNN with dropout,
an LSTM, an EmbeddingBag text classifier, tanh, sigmoid and GELU+LayerNorm MLPs), trained by SGD, Adam or AdamW to
convergence on small synthetic tasks (2,000 steps of 32, about 36 epochs), saving every 100 steps (the detection and
held-out benchmarks save every 500), a validation pass of 256 samples every 200 steps.

Faults (injected at training step 1,000 unless said): ``explode`` (learning rate x300), ``frozen`` (learning rate 0:
the weights stop), ``imbalance`` (90% of the data in class 0, from step 0). ``healthy`` runs have none, and are judged
against the ground truth measured without the rules: a run is healthy when its final validation loss is within 5% of
its best (as the detection benchmark), and overfitting otherwise (these small data sets are memorised: the rules that
flag an overfitting "healthy" run are right).

Provenance: written for issue 30 after the held-out benchmark, as an independent check of the review's path. Its
first run changed three definitions (SmxOverfitMeans, SmxLossPlateau, SmxClassImbalance: docs/rules.md says which
measurement), so it is no longer held out for those; their thresholds were chosen on the tuning runs.

    python bench/review_path_bench.py                       # 7 architectures x 4 kinds, about 15 minutes
    python bench/review_path_bench.py --archs gelu_ln --kinds healthy,explode
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARCHS = ("cnn_bn", "cnn_plain", "lstm", "embbag", "tanh_mlp", "sigmoid_mlp", "gelu_ln")
KINDS = ("healthy", "explode", "frozen", "imbalance")
STEPS, SAVE, EVAL_EVERY, ONSET, BATCH, VAL = 2000, 100, 200, 1000, 32, 256
PLAN = f"region: us-west-2\ns3_output_path: s3://bucket/debug\nprofile: recommended\nhook:\n  save_interval: {SAVE}\n"
OPTIMIZERS = {"cnn_bn": ("adam", 1e-3), "cnn_plain": ("sgd", 0.02), "tanh_mlp": ("sgd", 0.05),
              "sigmoid_mlp": ("adam", 3e-3), "gelu_ln": ("adamw", 1e-3), "lstm": ("adam", 3e-3), "embbag": ("adam", 3e-3)}


def _data(arch: str, g: Any, torch: Any) -> tuple[Any, Any, int]:
    if arch.startswith("cnn"):
        x = torch.randn(2048, 1, 12, 12, generator=g)
        return x, (x.flatten(1) @ torch.randn(144, 5, generator=g)).argmax(1), 5
    if arch == "lstm":
        x = torch.randn(2048, 10, 6, generator=g)
        return x, (x.sum((1, 2)) > 0).long() + (x[:, -1, 0] > 0).long(), 3
    if arch == "embbag":
        x = torch.randint(0, 200, (2048, 12), generator=g)
        return x, torch.randn(200, 4, generator=g)[x].sum(1).argmax(1), 4
    x = torch.randn(2048, 20, generator=g)
    w = torch.randn(20, 6, generator=g)
    return x, (torch.tanh(x @ w) + 0.1 * x[:, :6]).argmax(1), 6


def _model(arch: str, k: int, torch: Any) -> Any:
    nn = torch.nn

    class LSTMNet(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.rnn, self.head = nn.LSTM(6, 24, batch_first=True), nn.Linear(24, k)

        def forward(self, x: Any) -> Any:
            return self.head(self.rnn(x)[0][:, -1])

    class EmbBag(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.fc, self.act, self.out = nn.EmbeddingBag(200, 16), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, k)

        def forward(self, x: Any) -> Any:
            return self.out(self.act(self.fc(self.emb(x))))

    if arch == "cnn_bn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(16, k))
    if arch == "cnn_plain":
        return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(),
                             nn.Dropout(0.2), nn.Linear(8 * 8 * 8, k))
    if arch == "tanh_mlp":
        m = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, k))
        for layer in m:
            if isinstance(layer, nn.Linear):
                nn.init.xavier_uniform_(layer.weight)
        return m
    if arch == "sigmoid_mlp":
        return nn.Sequential(nn.Linear(20, 48), nn.Sigmoid(), nn.Linear(48, 48), nn.Sigmoid(), nn.Linear(48, k))
    if arch == "gelu_ln":
        return nn.Sequential(nn.Linear(20, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64),
                             nn.GELU(), nn.Linear(64, k))
    if arch == "lstm":
        return LSTMNet()
    return EmbBag()


@dataclass
class Outcome:
    arch: str
    kind: str
    fired: dict[str, int | None]  # rule -> first global step it fired at
    val: list[float]


def _first_steps(doc: dict[str, Any]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name, r in doc.items():
        if isinstance(r, dict) and r.get("RuleTriggered"):
            steps = [t["first_step"] for t in r.get("Details", {}).get("tensors", {}).values()
                     if isinstance(t, dict) and t.get("first_step") is not None]
            out[name] = min(steps) if steps else None
    return out


def run(arch: str, kind: str, root: Path, *, seed: int = 0) -> Outcome:
    import torch

    import smx_debug.hook as smd
    from smx_debug.cli import main as cli
    from smx_debug.config import DebugPlan

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(seed)
    x, y, k = _data(arch, g, torch)
    if kind == "imbalance":
        keep = (y == 0) | (torch.rand(len(y), generator=g) < 0.1)
        x, y = x[keep], y[keep]
    xv, yv, x, y = x[-VAL:], y[-VAL:], x[:-VAL], y[:-VAL]
    model, loss_fn = _model(arch, k, torch), torch.nn.CrossEntropyLoss()
    name, lr = OPTIMIZERS[arch]
    opt = (torch.optim.Adam(model.parameters(), lr=lr) if name == "adam" else torch.optim.AdamW(model.parameters(), lr=lr)
           if name == "adamw" else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    out, plan = root / f"{arch}-{kind}", root / "plan.yaml"
    plan.write_text(PLAN, encoding="utf-8")
    hook = smd.Hook.from_plan(DebugPlan.from_file(plan), out_dir=out)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    val: list[float] = []
    for step in range(STEPS):
        if step == ONSET and kind in ("explode", "frozen"):
            for group in opt.param_groups:
                group["lr"] = group["lr"] * 300 if kind == "explode" else 0.0
        idx = torch.randint(0, len(x), (BATCH,), generator=g)
        loss = loss_fn(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % EVAL_EVERY == EVAL_EVERY - 1:
            hook.set_mode(smd.modes.EVAL)
            model.eval()
            with torch.no_grad():
                val.append(sum(float(loss_fn(model(xv[i:i + 64]), yv[i:i + 64])) for i in range(0, VAL, 64)) / 4)
            model.train()
            hook.set_mode(smd.modes.TRAIN)
    hook.close()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        cli(["rules", "evaluate", str(out), "--plan", str(plan), "--json", "-"])
    return Outcome(arch, kind, _first_steps(json.loads(buf.getvalue())), val)


def _onset_global() -> int:
    """The global step of training step ONSET (each validation pass before it adds its 4 steps)."""
    return ONSET + 4 * (ONSET // EVAL_EVERY)


def _onset(kind: str) -> int:
    return 0 if kind in ("healthy", "imbalance") else _onset_global()


def _detecting(o: Outcome) -> dict[str, int]:
    """The rules that fired at or after the fault's onset (a rule that fired before it, on an overfitting run, is
    not evidence of the injected fault), with their first step."""
    return {r: s for r, s in o.fired.items() if s is not None and s >= _onset(o.kind)}


def _truth(o: Outcome) -> str:
    if o.kind != "healthy":
        return o.kind
    rise = (o.val[-1] / min(o.val) - 1) * 100 if o.val and min(o.val) > 0 else float("nan")
    return "healthy" if rise <= 5 else f"overfit {rise:+.0f}%"


def report(outcomes: list[Outcome]) -> dict[str, Any]:
    faults = [o for o in outcomes if o.kind != "healthy"]
    healthy = [o for o in outcomes if o.kind == "healthy"]
    print(f"{'run':24s} {'truth':12s} {'first rule at/after the onset (step)':40s} all that fired (first step)")
    delays: list[int] = []
    for o in outcomes:
        hits = _detecting(o) if o.kind != "healthy" else {r: s or 0 for r, s in o.fired.items()}
        first = min(hits.items(), key=lambda kv: kv[1]) if hits else None
        if o.kind != "healthy" and first:
            delays.append(first[1] - _onset(o.kind))
        shown = f"{first[0]} ({first[1]})" if first else "-"
        every = ", ".join(f"{r} ({s})" for r, s in sorted(o.fired.items())) or "none"
        print(f"{o.arch + '-' + o.kind:24s} {_truth(o):12s} {shown:40s} {every}")
    truly = [o for o in healthy if _truth(o) == "healthy"]
    summary = {
        "faults_detected": sum(bool(_detecting(o)) for o in faults), "faults": len(faults),
        "healthy_flagged": sum(bool(o.fired) for o in truly), "healthy": len(truly),
        "overfitting_flagged": sum(bool(o.fired) for o in healthy if o not in truly),
        "overfitting": len(healthy) - len(truly),
        "median_delay_steps": sorted(delays)[len(delays) // 2] if delays else None,
    }
    print(f"review_path_bench: {summary['faults_detected']}/{summary['faults']} faults detected (a rule firing at or "
          f"after the onset), {summary['healthy_flagged']}/{summary['healthy']} healthy runs flagged (ground truth: "
          f"final validation loss within 5% of its best), {summary['overfitting_flagged']}/{summary['overfitting']} "
          f"overfitting 'healthy' runs flagged, median delay {summary['median_delay_steps']} global steps (save "
          f"interval {SAVE})")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default=",".join(ARCHS))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--quick", action="store_true", help="two architectures, healthy and explode")
    parser.add_argument("--out", help="keep the trials here (default: a temporary folder, deleted)")
    args = parser.parse_args(argv)
    archs = ("gelu_ln", "cnn_bn") if args.quick else tuple(args.archs.split(","))
    kinds = ("healthy", "explode") if args.quick else tuple(args.kinds.split(","))
    unknown = sorted((set(archs) - set(ARCHS)) | (set(kinds) - set(KINDS)))
    if unknown:
        parser.error(f"unknown architecture or kind {unknown}: architectures {list(ARCHS)}, kinds {list(KINDS)}")
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(args.out or tmp)
        root.mkdir(parents=True, exist_ok=True)
        outcomes = []
        for arch in archs:
            for kind in kinds:
                outcomes.append(run(arch, kind, root))
                print(f"  {arch}-{kind}: {', '.join(sorted(outcomes[-1].fired)) or 'quiet'}", file=sys.stderr,
                      flush=True)
        summary = report(outcomes)
    ok = summary["faults"] == 0 or summary["faults_detected"] / summary["faults"] >= 0.95
    ok = ok and (summary["healthy"] == 0 or summary["healthy_flagged"] / summary["healthy"] <= 0.05)
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
