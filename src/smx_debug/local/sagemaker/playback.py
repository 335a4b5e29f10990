"""SageMaker's part of a launched training job on the local AWS: the job runs and its rule jobs settle.

moto creates a training job as Completed and never writes anything. A :class:`JobPlayback` makes a job
launched on the local AWS (through the SDK or boto3) behave as on SageMaker, in job time compressed by
``speed``: the job is InProgress, writes Debugger's profiler output minute by minute (from
:mod:`smx_debug.simulate`), its profiler rules are InProgress and each settles with what our local
evaluation of the same rule configuration finds (IssuesFound as soon as it fires), and the job completes.
Tensor (Debugger) rules cannot be evaluated without tensors: they settle as ``Stopped`` and say why.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from smx_debug.contracts import (
    JOB_COMPLETED,
    JOB_IN_PROGRESS,
    NO_ISSUES_FOUND,
    RULE_IN_PROGRESS,
    RULE_STOPPED,
)
from smx_debug.data import SystemMetricsReader, framework_metrics, step_durations
from smx_debug.data.sources import split_s3_uri
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.evaluate import LiveEvaluator
from smx_debug.local import install as install_local
from smx_debug.local.sagemaker.rule_statuses import rule_status, set_rule_statuses
from smx_debug.local.sagemaker.training_jobs import set_training_job_status
from smx_debug.local.server import LocalAws
from smx_debug.rules.params import PROFILER_REPORT
from smx_debug.simulate import Simulation, SimulationSpec

if TYPE_CHECKING:
    from smx_debug.config import DebugPlan
    from smx_debug.simulate import ScenarioKind

_HOSTS = {"nodes": 1, "cpus": 8, "gpus": 1, "seed": 0}  # a small simulated job: one node, 8 vCPUs, one GPU
_TENSOR_DETAILS = "the local AWS does not evaluate tensor rules (no tensors are written)"


class JobPlayback:
    """Play a launched job: profiler output into the plan's S3 path, job and rule statuses as SageMaker sets them.

    Example:
        >>> playback = JobPlayback(aws, job, plan, scenario="cpu_bottleneck", minutes=20).start()  # doctest: +SKIP
        >>> data.wait_for_rules(job, sagemaker_client=sm)  # the rules settle as the job plays  # doctest: +SKIP
    """

    def __init__(
        self,
        aws: LocalAws,
        job_name: str,
        plan: DebugPlan,
        *,
        scenario: ScenarioKind = "healthy",
        minutes: int = 20,
        onset_min: float = 5.0,
        speed: float = 120.0,
        **hosts: int,
    ) -> None:
        """``hosts``: ``nodes``, ``cpus``, ``gpus`` and ``seed`` of the simulated job (by default one node, 8 vCPUs,
        one GPU, seed 0), checked by :class:`~smx_debug.simulate.SimulationSpec`."""
        for field, value in (("minutes", minutes), ("speed", speed)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{field} must be a positive number, got {value!r}", field=field, value=value)
        self.aws = aws
        self.job_name = job_name
        self.plan = plan
        self.speed = float(speed)
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=minutes)
        self.spec = SimulationSpec(scenario=scenario, onset_s=onset_min * 60.0, job_start=start,
                                   duration_s=minutes * 60.0, **{**_HOSTS, **hosts})
        self._simulation = Simulation(self.spec)
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.statuses: dict[str, str] = {}

    # ------------------------------------------------------------------------------------ running
    def start(self) -> JobPlayback:
        """Play in a background thread (returns at once)."""
        self._thread = threading.Thread(target=self._run_capturing, name=f"playback-{self.job_name}", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait for the job to finish playing; re-raises what went wrong in the background."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error

    def _run_capturing(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # handed to join()
            self.error = exc

    def run(self) -> None:
        """Play the whole job in this thread."""
        install_local(self.aws)
        s3 = self.aws.client("s3")
        bucket, key = split_s3_uri(self.plan.profiler.s3_output_path or self.plan.s3_output_path)
        prefix = f"{key.rstrip('/')}/{self.job_name}/profiler-output".lstrip("/")
        uri = f"s3://{bucket}/{prefix}/"
        configs, tensor_rules = self.plan.evaluated_rules(expand_profiler_report=False)
        live = LiveEvaluator(rules=configs)
        has_report = any(r.rule_configuration_name == PROFILER_REPORT for r in self.plan.profiler_rules)
        details: dict[str, str] = {}
        set_training_job_status(self.aws, self.job_name, JOB_IN_PROGRESS)
        self._publish(live.status, details, tensor_rules, has_report, final=False)
        reader = SystemMetricsReader(uri, s3_client=s3, progress=False)
        for minute in self._simulation.minutes():
            wall = time.monotonic()
            for rel, body, _records in self._simulation.files_for_minute(minute):
                s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=body)
            try:
                steps = step_durations(framework_metrics(uri, s3_client=s3, progress=False))
            except NotFoundError:  # still initializing: no training step traced yet
                steps = None
            transitions = live.update(system=reader.refresh(), steps=steps, replace=True)
            if transitions:
                details.update({t.rule: t.status_details for t in transitions})
                self._publish(live.status, details, tensor_rules, has_report, final=False)
            time.sleep(max(0.0, 60.0 / self.speed - (time.monotonic() - wall)))
        set_training_job_status(self.aws, self.job_name, JOB_COMPLETED)
        details.update({t.rule: t.status_details for t in live.finish()})
        self._publish(live.status, details, tensor_rules, has_report, final=True)

    def _publish(self, statuses: Mapping[str, str], details: dict[str, str], tensor_rules: list[str],
                 has_report: bool, *, final: bool) -> None:
        profiler = [rule_status(name, st, details=details.get(name) if st != RULE_IN_PROGRESS else None)
                    for name, st in statuses.items()]
        if has_report and PROFILER_REPORT not in statuses:
            profiler.append(rule_status(PROFILER_REPORT, NO_ISSUES_FOUND if final else RULE_IN_PROGRESS))
        debug: list[dict[str, Any]] = [
            rule_status(name, RULE_STOPPED, details=_TENSOR_DETAILS) if final else rule_status(name, RULE_IN_PROGRESS)
            for name in tensor_rules
        ]
        set_rule_statuses(self.aws, self.job_name, debug=debug or None, profiler=profiler or None)
        self.statuses = {e["RuleConfigurationName"]: e["RuleEvaluationStatus"] for e in [*debug, *profiler]}
