"""The public surface, pinned: a change here is a change to what users import, made on purpose."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

PUBLIC = {
    "smx_debug": [
        "AccessDeniedError", "AwsError", "ConfigError", "DataError", "DebugPlan", "JobNotFoundError",
        "NoDataYetError", "NotFoundError", "RegionError", "SmxDebugError", "SmxDebugWarning",
        "TensorUnavailableError", "UnknownDtypeError", "UnknownNameError", "__version__",
    ],
    "smx_debug.actions": [
        "ACTIONS", "ClaimInProgressError", "Deadline", "EventRefusedError", "Ledger", "MalformedEventError",
        "MemoryLedger", "OutOfTimeError", "Runtime", "Settings", "Trigger", "VerifiedJob", "handle_notify",
        "handle_retrain", "handle_rule_metrics", "handle_state_change", "handle_stop_training", "once", "respond",
        "verify_job",
    ],
    "smx_debug.config": [
        "CollectionConfig", "DataloaderProfiling", "DebugPlan", "FrameworkProfiling", "HookConfig",
        "MAX_RULES_PER_KIND", "MetricRange", "NotifyAction", "ProfilerSettings", "PythonProfiling", "RuleAction",
        "RuleConfig", "SmxDebugWarning", "StopTrainingAction",
    ],
    "smx_debug.data": [
        "SystemMetricsReader", "framework_metrics", "profiler_report", "rule_summary", "rule_summary_many",
        "step_durations", "system_metrics", "system_metrics_wide", "wait_for_rules",
    ],
    "smx_debug.analysis": [
        "chrome_trace", "dip_causes", "gpu_dips", "step_outlier_scans", "step_outliers", "step_statistics",
        "training_phases", "utilization_stats",
    ],
    "smx_debug.evaluate": [
        "ConfiguredRule", "JobData", "LiveEvaluator", "LoadReport", "RuleResult", "Transition",
        "configured_rule", "evaluate", "evaluate_rule", "load_path",
    ],
    "smx_debug.htmlreport": [
        "CostEstimate", "JobOutcome", "ReportInput", "ReportModel", "RightSizing", "TensorInput", "build_model",
        "estimate_cost", "fetch_outcome", "render_comparison", "render_report", "right_size", "write_comparison",
        "write_report",
    ],
    "smx_debug.fleet": [
        "ACTION_EVENT", "AppendReport", "FleetRoot", "QueryResult", "S3Options", "TRIGGER_EVENT", "Verdict",
        "append_cloudwatch", "append_job", "append_profiler", "append_system_minutes", "append_verdicts", "collect",
        "execute", "last_minute", "list_queries", "open_root", "run_query", "to_athena",
    ],
    "smx_debug.rules": [
        "CollectionRequirement", "ParamSpec", "RULE_IMAGE_ACCOUNTS", "RuleKind", "RuleSpec", "TENSOR_RULES",
        "get_rule", "list_rules", "rule_evaluator_image",
    ],
    "smx_debug.simulate": [
        "SCENARIOS", "ScenarioKind", "Simulation", "SimulationSpec", "WriteResult",
    ],
    "smx_debug.local": [
        "DeployedStack", "LOCAL_ACCOUNT_ID", "LocalAws", "create_training_job", "deliver_event", "deliver_schedule",
        "deploy_stack", "evaluate_alarms", "execution_role", "install", "rule_status", "set_rule_statuses",
        "set_training_job_status", "sns_lambda_deliveries", "state_change_event", "stop_calls", "subscribe_queue",
        "tick",
    ],
    "smx_debug.hook": [
        "Collection", "CollectionKeys", "GuardStop", "Hook", "HookSettings", "MemorySink", "ModeKeys",
        "ReductionConfig", "SaveConfig", "SaveConfigMode", "SavedStep", "TensorSink", "create_trial", "del_hook",
        "get_hook", "modes", "parse_hook_config", "read_hook_config", "set_hook",
    ],
    "smx_debug.tensors": [
        "Collection", "CollectionsFile", "END_OF_JOB", "ModeKeys", "NORMS", "REDUCTIONS", "REDUCTIONS_PREFIX",
        "RawTensor", "ReductionConfig", "ReductionName", "SaveConfig", "SaveConfigMode", "TENSOR_COLUMNS", "Tensor",
        "TensorValues", "Trial", "TrialArrays", "TrialWriter", "compute_reduction", "create_trial", "modes", "parse_mode", "parse_reduction_name",
        "reduction_tensor_name"
    ],
    "smx_debug.watch": [
        "Clients", "EvaluatorSettings", "WatchSpec", "WatchedRule", "run_once",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_api_all_is_pinned_and_importable(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == PUBLIC[module]
    for name in mod.__all__:
        assert getattr(mod, name) is not None, name


@pytest.mark.parametrize("module", ["smx_debug.analysis", "smx_debug.data", "smx_debug.tensors"])
def test_public_api_lazy_face_names_stay_theirs_after_every_module_is_imported(module: str) -> None:
    """A lazy face's name is looked up only when the package lacks it: a module of the package named like it
    (data/rule_summary.py beside ``rule_summary``) would take its place once anything imports that module."""
    face = importlib.import_module(module)
    for info in pkgutil.iter_modules(face.__path__):
        importlib.import_module(f"{module}.{info.name}")
    assert [name for name in face.__all__ if isinstance(getattr(face, name), types.ModuleType)] == []


def test_public_api_lambda_core_needs_no_heavy_dependencies() -> None:
    """The Lambda assets ship smx_debug.actions alone: it must not pull pydantic, pandas or the SDK."""
    import subprocess
    import sys

    code = ("import smx_debug.actions; from smx_debug._lazy import imported; "
            "print(sorted(m for m in ('pydantic', 'pandas', 'numpy', 'sagemaker', 'yaml') if imported(m)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
