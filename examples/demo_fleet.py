"""`make demo`'s last step: one fleet query over every job the account ran, from what the stack's functions wrote.

While the demo ran, the deployed functions filled the fleet dataset in the stack's bucket: the action core logged
every trigger and action to the verdict log's inbox (the Debugger event handlers for the first job, the scheduled
evaluator for the others), and the evaluator appended the minutes of the watched jobs it evaluated. Now the
schedule ticks the evaluator and the fleet collector (the deployed functions, in process, every call authorized by
the local IAM). The evaluator appends the watched jobs' last minutes now that they have ended: the second's after
its last run, and all of the first's, which Debugger's rules stopped before any evaluator run saw it. The
collector writes every job's metadata, the other team's CloudWatch minutes and the verdict log. Then
``idle_gpu_hours``, the same SQL text the
stack's Athena workgroup runs, answers on DuckDB straight from the local S3: idle GPU hours and their cost by
job and team, the other team's jobs included. Run alone: part of ``python examples/demo.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smx_debug.local import LocalAws

__all__ = ["FLEET_QUERY", "fleet_table"]

FLEET_QUERY = "idle_gpu_hours"
Say = Callable[..., None]


def fleet_table(aws: LocalAws, bucket: str, *, say: Say) -> int:
    """Tick the fleet collector, then print ``idle_gpu_hours`` over the bucket's dataset; 0 when it answered."""
    import pandas as pd

    from smx_debug import fleet, local
    from smx_debug.fleet.s3_boto import stack_root

    say("9/9 the fleet: SQL over every job of the account")
    (evaluated,) = local.deliver_schedule(aws, handlers=["evaluator"])
    if evaluated.error is not None:
        say("fleet", f"the evaluator failed: {evaluated.error!r}")
        return 1
    ended: list[str] = evaluated.result.get("ended", [])
    say("fleet", f"evaluator ({evaluated.function}): " + (
        f"the last minutes of {', '.join(ended)} (ended) appended to the fleet dataset" if ended else
        "no ended watched job owes minutes (its earlier runs appended each one's through its end)"))
    (collected,) = local.deliver_schedule(aws, handlers=["fleet_collector"])
    if collected.error is not None:
        say("fleet", f"the fleet collector failed: {collected.error!r}")
        return 1
    done: dict[str, Any] = collected.result
    rows = done["rows"]
    say("fleet", f"fleet collector ({collected.function}): {done['jobs']} jobs' metadata, {done['minutes_jobs']} "
        f"unwatched jobs' CloudWatch minutes, {done['inbox_objects']} verdict-log objects compacted into "
        f"{rows.get('verdicts', 0)} rows; the evaluator appends its watched jobs' minutes itself")
    result = fleet.run_query(FLEET_QUERY, since="2d", root=stack_root(bucket, aws.client("s3")))
    if result.empty:
        say("fleet", "idle_gpu_hours: no idle GPU minute in the dataset")
        return 1
    table = result[["job", "team", "instance_type", "idle_gpu_hours", "idle_cost_usd"]].copy()
    table["team"] = table["team"].fillna("-")
    table = table.groupby(["job", "team", "instance_type"], as_index=False)[["idle_gpu_hours", "idle_cost_usd"]].sum()
    table = table.sort_values("idle_cost_usd", ascending=False)
    with pd.option_context("display.float_format", "{:,.2f}".format, "display.width", 120):
        say("fleet", f"smx-debug fleet {FLEET_QUERY} --since 2d --root s3://{bucket}/smx-debug/fleet/ "
            "(DuckDB; the same SQL the stack's Athena workgroup runs):")
        print(table.to_string(index=False))
    total = float(table["idle_cost_usd"].sum())
    say("fleet", f"{len(table)} jobs idled GPUs: {table['idle_gpu_hours'].sum():.2f} GPU hours, ${total:.2f} at "
        f"list price; {result.attrs.get('rows_scanned', '?')} dataset rows scanned")
    return 0
