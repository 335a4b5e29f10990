"""Catalog data: the 21 built-in Debugger rules and the 11 profiler rules.

Sources (docs/rules.md says which wins where they disagree): rule names, ``rule_to_invoke`` values and
required collections from smdebug-rulesconfig 1.0.1 (``debugger_rules/rule_config_jsons/ruleConfigs.json``);
profiler rule parameters, defaults and bounds from ``smdebug_rulesconfig/profiler_rules/rules.py`` (what the
SDK sends; real Debugger output shows the same values); Debugger rule parameter names and defaults from AWS's
current "List of Debugger built-in rules",
https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-rules.html (last published as Markdown in
awsdocs/amazon-sagemaker-developer-guide ``doc_source/debugger-built-in-rules.md`` @29f32765, 2023-02-27:
``other_trials``, ``threshold_tanh_min``/``_max``, ``threshold_sigmoid_min``/``_max``, Overtraining ``delta``
0.01). A default of None means the rule container decides; bounds are the documented valid values.
``tests/unit/rules/test_rule_catalog.py`` checks this table against smdebug_rulesconfig and against the
guide's names and defaults (``tests/data/rules/debugger_builtin_rule_parameters.json``).
"""

from __future__ import annotations

from smx_debug.rules.definitions import CollectionRequirement as C
from smx_debug.rules.definitions import ParamSpec as P
from smx_debug.rules.definitions import RuleSpec

_COLLECTION_NAMES = P("collection_names", "str", None, "comma-separated collections the rule checks")
_TENSOR_REGEX = P("tensor_regex", "regex", None, "regex of tensor names the rule checks")
_SCAN = P("scan_interval_us", "int", 60_000_000, "how often the rule scans timeline files, in microseconds", gt=0)


def _pct(name: str, default: float, description: str) -> P:
    return P(name, "float", default, description, ge=0, le=100)


def _pos(name: str, default: int, description: str) -> P:
    return P(name, "int", default, description, gt=0)


_PATIENCE = _pos("patience", 1000, "datapoints to skip before the first evaluation")


def _bottleneck(busy: P) -> tuple[P, ...]:
    """CPUBottleneck's and IOBottleneck's parameters: ``busy`` is the one that says when the CPU or I/O is busy."""
    return (
        _pct("threshold", 50, "percentage of time in bottleneck that fires"),
        _pct("gpu_threshold", 10, "GPU utilization below which the GPU counts as underused"),
        busy,
        _PATIENCE,
        _SCAN,
    )


_DEBUGGER = (
    RuleSpec(
        "VanishingGradient", "vanishing_gradient", "debugger",
        "Gradients became so small that the weights stop learning.",
        (P("threshold", "float", 1e-07, "mean absolute gradient below which the rule fires", ge=0),),
        (C("gradients", save_interval=500),),
    ),
    RuleSpec(
        "SimilarAcrossRuns", "similar_across_runs", "debugger",
        "Tensors differ from the same tensors in another training run.",
        (
            P("other_trials", "str", None, "the completed training job to compare with", required=True),
            _COLLECTION_NAMES,
            _TENSOR_REGEX,
        ),
    ),
    RuleSpec(
        "WeightUpdateRatio", "weight_update_ratio", "debugger",
        "The ratio of weight updates to weights is too large or too small.",
        (
            P("num_steps", "int", None, "steps across which the update ratio is computed", gt=0),
            P("large_threshold", "float", 10, "largest allowed update ratio", gt=0),
            P("small_threshold", "float", 1e-08, "smallest allowed update ratio", ge=0),
            P("epsilon", "float", 1e-09, "constant that avoids division by zero", ge=0),
        ),
        (C("weights", save_interval=500),),
        saved_steps_needed=2,
    ),
    RuleSpec(
        "AllZero", "all_zero", "debugger",
        "A tensor is entirely or mostly zeros.",
        (_COLLECTION_NAMES, _TENSOR_REGEX, _pct("threshold", 100, "percentage of zero values that fires")),
    ),
    RuleSpec(
        "ExplodingTensor", "exploding_tensor", "debugger",
        "A tensor contains NaN or infinite values.",
        (_COLLECTION_NAMES, _TENSOR_REGEX, P("only_nan", "bool", False, "check for NaN only, not infinity")),
    ),
    RuleSpec(
        "UnchangedTensor", "unchanged_tensor", "debugger",
        "A tensor stopped changing across steps.",
        (
            _COLLECTION_NAMES,
            _TENSOR_REGEX,
            _pos("num_steps", 3, "saved steps across which the tensor must stay unchanged"),
            P("rtol", "float", 1e-05, "relative tolerance (numpy.allclose)", ge=0),
            P("atol", "float", 1e-08, "absolute tolerance (numpy.allclose)", ge=0),
            P("equal_nan", "bool", False, "treat NaNs as equal"),
        ),
        saved_steps_needed="num_steps",
    ),
    RuleSpec(
        "LossNotDecreasing", "loss_not_decreasing", "debugger",
        "The loss is not decreasing at the expected rate.",
        (
            _COLLECTION_NAMES,
            _TENSOR_REGEX,
            P("use_losses_collection", "bool", True, "also check the losses collection"),
            _pos("num_steps", 10, "saved steps between two loss comparisons"),
            P("diff_percent", "float", 0.1, "minimum decrease in percent between two checks", gt=0, le=100),
            P("increase_threshold_percent", "float", 5, "largest allowed increase in percent", ge=0, le=100),
            P("mode", "str", None, "mode to check: TRAIN, EVAL or GLOBAL (default: EVAL, then TRAIN, then GLOBAL)"),
        ),
        (C("losses", save_interval=500),),
        saved_steps_needed="num_steps",
    ),
    RuleSpec(
        "CheckInputImages", "check_input_images", "debugger",
        "Input images are not normalized (mean far from zero).",
        (
            P("threshold_mean", "float", 0.2, "largest allowed absolute mean", ge=0),
            P("threshold_samples", "int", 500, "images to sample before the rule fires", gt=0),
            P("regex", "regex", ".*hybridsequential0_input_0", "regex of the input tensor"),
            P("channel", "int", 1, "position of the color channel in the input shape", ge=0),
        ),
        (C("input_image", include_regex=".*hybridsequential0_input_0", save_interval=500),),
    ),
    RuleSpec(
        "DeadRelu", "dead_relu", "debugger",
        "Too many ReLU activations output zero.",
        (
            P("tensor_regex", "regex", ".*relu_output", "regex of the ReLU outputs"),
            _pct("threshold_inactivity", 1.0, "percentage of zero outputs that makes a unit inactive"),
            _pct("threshold_layer", 50.0, "percentage of inactive units in a layer that fires"),
        ),
        (C("relu_output", include_regex=".*relu_output", save_interval=500),),
    ),
    RuleSpec(
        "Confusion", "confusion", "debugger",
        "The confusion matrix of a classifier is poor.",
        (
            P("category_no", "int", None, "number of categories (default: from the labels and predictions)", ge=2),
            P("labels", "str", "labels", "tensor name of the labels"),
            P("predictions", "str", "predictions", "tensor name of the predictions"),
            P("labels_collection", "str", "labels", "collection holding the labels"),
            P("predictions_collection", "str", "predictions", "collection holding the predictions"),
            P("min_diag", "float", 0.9, "smallest allowed diagonal value", ge=0, le=1),
            P("max_off_diag", "float", 0.1, "largest allowed off-diagonal value", ge=0, le=1),
        ),
    ),
    RuleSpec(
        "TreeDepth", "tree_depth", "debugger",
        "XGBoost trees are deeper than expected.",
        (P("depth", "float", 4, "largest expected tree depth (log2 of the largest node id)", gt=0),),
        frameworks=("xgboost",),
    ),
    RuleSpec(
        "ClassImbalance", "class_imbalance", "debugger",
        "The classes in the training data are imbalanced.",
        (
            P("threshold_imbalance", "float", 10, "largest allowed ratio between class counts", gt=0),
            P("threshold_misprediction", "float", 0.7, "largest allowed misprediction rate per class", ge=0, le=1),
            _pos("samples", 500, "labels to process before the rule fires"),
            P("argmax", "bool", False, "apply argmax to the predictions"),
            P("labels_regex", "regex", ".*labels", "regex of the labels tensor"),
            P("predictions_regex", "regex", ".*predictions", "regex of the predictions tensor"),
        ),
    ),
    RuleSpec(
        "Overfit", "overfit", "debugger",
        "Validation loss diverges from training loss.",
        (
            _TENSOR_REGEX,
            P("start_step", "int", 0, "step from which the losses are compared", ge=0),
            _pos("patience", 1, "saved steps the ratio must exceed the threshold"),
            P("ratio_threshold", "float", 0.1, "largest allowed (validation - train) / train loss ratio", ge=0),
        ),
        saved_steps_needed="patience",
        reads=("losses",),
    ),
    RuleSpec(
        "TensorVariance", "tensor_variance", "debugger",
        "A tensor's variance is very high or very low.",
        (
            _COLLECTION_NAMES,
            _TENSOR_REGEX,
            P("max_threshold", "float", None, "largest allowed variance"),
            P("min_threshold", "float", None, "smallest allowed variance"),
        ),
    ),
    RuleSpec(
        "Overtraining", "overtraining", "debugger",
        "Training or validation loss stopped improving.",
        (
            _pos("patience_train", 5, "saved steps the training loss may stall"),
            _pos("patience_validation", 10, "saved steps the validation loss may stall"),
            P("delta", "float", 0.01, "smallest improvement that counts as a new optimum", ge=0),
        ),
        saved_steps_needed="patience_train",
        reads=("losses",),
    ),
    RuleSpec(
        "PoorWeightInitialization", "poor_weight_initialization", "debugger",
        "The weights were initialized poorly (activation variance across layers).",
        (
            P("activation_inputs_regex", "regex", ".*relu_input", "regex of the activation inputs"),
            P("threshold", "float", 10.0, "largest allowed ratio of per-layer variances", gt=0),
            P("distribution_range", "float", 0.001, "smallest allowed 5th-95th percentile range", ge=0),
            _pos("patience", 5, "steps to wait until the loss decreases"),
            _pos("steps", 10, "steps the rule analyses"),
        ),
        (C("relu_input", include_regex=".*relu_input", save_interval=500),),
        saved_steps_needed="steps",
    ),
    RuleSpec(
        "SaturatedActivation", "saturated_activation", "debugger",
        "tanh or sigmoid activations are saturated.",
        (
            _COLLECTION_NAMES,
            P("tensor_regex", "regex", ".*tanh_input|.*sigmoid_input", "regex of the activation inputs"),
            P("threshold_tanh_min", "float", -9.4999, "tanh input below which the unit is saturated"),
            P("threshold_tanh_max", "float", 9.4999, "tanh input above which the unit is saturated"),
            P("threshold_sigmoid_min", "float", -23, "sigmoid input below which the unit is saturated"),
            P("threshold_sigmoid_max", "float", 16.99999, "sigmoid input above which the unit is saturated"),
            _pct("threshold_inactivity", 1.0, "percentage of saturated outputs that makes a unit inactive"),
            _pct("threshold_layer", 50.0, "percentage of inactive units in a layer that fires"),
        ),
    ),
    RuleSpec(
        "NLPSequenceRatio", "nlp_sequence_ratio", "debugger",
        "Too many padding (or other) tokens in NLP input sequences.",
        (
            P("tensor_regex", "regex", ".*embedding0_input_0", "regex of the input sequences"),
            P("token_values", "str", "0", "comma-separated token values to count"),
            P("token_thresholds_percent", "str", "50", "comma-separated largest percentages per token"),
        ),
        (C("input_sequence", include_regex=".*embedding0_input_0", save_interval=500),),
    ),
    RuleSpec(
        "StalledTrainingRule", "stalled_training_rule", "debugger",
        "No progress was saved for longer than a threshold (stalled job).",
        (
            _pos("threshold", 1800, "seconds without new steps before the rule fires"),
            P("stop_training_on_fire", "bool", False, "stop the job when the rule fires"),
            P("training_job_name_prefix", "str", None, "prefix of the job to stop"),
        ),
    ),
    RuleSpec(
        "FeatureImportanceOverweight", "feature_importance_overweight", "debugger",
        "A few XGBoost features dominate the feature importance.",
        (
            P("threshold", "float", 0.8, "largest allowed share of the top features", ge=0, le=1),
            _pos("nfeatures", 3, "number of top features"),
            P("tensor_regex", "regex", ".*feature_importance/weight", "regex of the importance tensors"),
        ),
        (C("feature_importance", save_interval=500),),
        frameworks=("xgboost",),
    ),
    RuleSpec(
        "CreateXgboostReport", "create_xgboost_report", "debugger",
        "Writes the XGBoost training report (never fires).",
        (),
        (
            C("metrics", save_interval=5),
            C("feature_importance", save_interval=5),
            C("hyperparameters", save_steps="0"),
            C("predictions", save_interval=5),
            C("labels", save_interval=5),
        ),
        frameworks=("xgboost",),
    ),
)

_PROFILER = (
    RuleSpec(
        "BatchSize", "BatchSize", "profiler",
        "GPUs are underused because the batch size is too small.",
        (
            _pct("cpu_threshold_p95", 70, "95th percentile of CPU utilization"),
            _pct("gpu_threshold_p95", 70, "95th percentile of GPU utilization"),
            _pct("gpu_memory_threshold_p95", 70, "95th percentile of GPU memory utilization"),
            _PATIENCE,
            _pos("window", 500, "window size for the quantiles"),
            _SCAN,
        ),
    ),
    RuleSpec(
        "CPUBottleneck", "CPUBottleneck", "profiler",
        "GPUs are underused because of CPU bottlenecks.",
        _bottleneck(_pct("cpu_threshold", 90, "CPU utilization above which the CPU counts as busy")),
    ),
    RuleSpec(
        "Dataloader", "Dataloader", "profiler",
        "The number of data loader processes does not fit the CPU cores.",
        (
            P("min_threshold", "float", 70, "least percentage of cores data loaders should use", gt=0),
            P("max_threshold", "float", 200, "most percentage of cores data loaders should use", gt=0),
            _SCAN,
        ),
    ),
    RuleSpec(
        "GPUMemoryIncrease", "GPUMemoryIncrease", "profiler",
        "GPU memory use grows steadily.",
        (
            P("increase", "float", 5, "absolute increase of the moving average in percent", gt=0),
            _PATIENCE,
            _pos("window", 10, "window size of the moving average"),
            _SCAN,
        ),
    ),
    RuleSpec(
        "IOBottleneck", "IOBottleneck", "profiler",
        "GPUs are underused because of I/O bottlenecks.",
        _bottleneck(_pct("io_threshold", 50, "I/O wait above which I/O counts as busy")),
    ),
    RuleSpec(
        "LoadBalancing", "LoadBalancing", "profiler",
        "Work is unevenly balanced across GPUs.",
        (
            _pct("threshold", 0.5, "largest allowed distance between GPU utilization histograms"),
            _PATIENCE,
            _SCAN,
        ),
    ),
    RuleSpec(
        "LowGPUUtilization", "LowGPUUtilization", "profiler",
        "GPU utilization is low or fluctuates.",
        (
            _pct("threshold_p95", 70, "95th percentile below which the GPU counts as underused"),
            _pct("threshold_p5", 10, "5th percentile below which utilization fluctuates"),
            _pos("window", 500, "datapoints for the quantiles"),
            _PATIENCE,
            _SCAN,
        ),
    ),
    RuleSpec(
        "MaxInitializationTime", "MaxInitializationTime", "profiler",
        "Training initialization takes too long.",
        (_pos("threshold", 20, "minutes to wait for the first step"), _SCAN),
    ),
    RuleSpec(
        "OverallSystemUsage", "OverallSystemUsage", "profiler",
        "Summarizes system usage per node (never fires).",
        (_SCAN,),
    ),
    RuleSpec(
        "StepOutlier", "StepOutlier", "profiler",
        "Some step durations are outliers.",
        (
            P("stddev", "float", 3, "standard deviations beyond which a step is an outlier", gt=0),
            P("mode", "str", None, "mode of the steps to check (default: TRAIN and EVAL)"),
            _pos("n_outliers", 10, "outliers to ignore before the rule fires"),
            _SCAN,
        ),
    ),
    RuleSpec(
        "ProfilerReport", "ProfilerReport", "profiler",
        "Runs all profiler rules and writes the profiler report; parameters are <Rule>_<parameter>.",
        parameter_prefixes=True,
    ),
)

RULES: tuple[RuleSpec, ...] = _DEBUGGER + _PROFILER
