"""What smx-debug adds to Debugger's built-in rules: how it evaluates each one, and the report's words for it.

:mod:`smx_debug.rules.registry` joins these tables with the catalog (:mod:`smx_debug.rules._builtin`) into one
:class:`~smx_debug.rules.registry.RuleDef` per built-in. A rule of our own carries the same fields itself (one
module under :mod:`smx_debug.rules.own`). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

_JOB = ("job",)
_TENSORS = ("tensors",)
_BOTH = ("job", "tensors")
# What data smx-debug evaluates each built-in on: "job" (the profiler's and the training metrics' frames,
# smx_debug.evaluate.registry), "tensors" (a trial, smx_debug.evaluate.tensor_eval). A built-in missing here is
# not evaluated by smx-debug (the XGBoost rules, SimilarAcrossRuns, ProfilerReport: rules.params says why).
EVALUATES_ON: Final[Mapping[str, tuple[str, ...]]] = {
    "BatchSize": _JOB, "CPUBottleneck": _JOB, "Dataloader": _JOB, "GPUMemoryIncrease": _JOB, "IOBottleneck": _JOB,
    "LoadBalancing": _JOB, "LowGPUUtilization": _JOB, "MaxInitializationTime": _JOB, "OverallSystemUsage": _JOB,
    "StepOutlier": _JOB,
    "LossNotDecreasing": _BOTH, "Overfit": _BOTH, "Overtraining": _BOTH, "StalledTrainingRule": _BOTH,
    "VanishingGradient": _TENSORS, "ExplodingTensor": _TENSORS, "DeadRelu": _TENSORS,
    "PoorWeightInitialization": _TENSORS, "SaturatedActivation": _TENSORS, "WeightUpdateRatio": _TENSORS,
    "AllZero": _TENSORS, "ClassImbalance": _TENSORS, "TensorVariance": _TENSORS, "UnchangedTensor": _TENSORS,
    "CheckInputImages": _TENSORS, "NLPSequenceRatio": _TENSORS, "Confusion": _TENSORS,
}

# The profiles besides ``debugger`` that include a built-in at its defaults (smx_debug.rules.registry.Profile):
# none today. ClassImbalance was in ``recommended`` until its misprediction criterion fired on untrained models
# once the hook kept enough labels; SmxClassImbalance judges the labels alone (docs/rules.md, "Recommended profile").
PROFILES: Final[Mapping[str, tuple[str, ...]]] = {}

# Rules the scheduled evaluator judges from CloudWatch's 1-minute data (instance metrics per host, training
# metrics), with the parameters it uses unless the plan sets them: Debugger's defaults count datapoints at 500 ms
# (patience 1000 is 8 minutes there, 16 hours at one datapoint a minute), so these are sized for minutes.
# ``window`` is in minutes: each evaluation looks at the last ``window`` minutes of data only. The evaluator judges
# every other rule it evaluates on tensors on the job's tensors (rules.watch_spec).
MINUTE_DEFAULTS: Final[Mapping[str, Mapping[str, bool | int | float | str]]] = {
    "CPUBottleneck": {"threshold": 50, "gpu_threshold": 10, "cpu_threshold": 90, "patience": 2},
    "LowGPUUtilization": {"threshold_p95": 70, "threshold_p5": 10, "window": 5, "patience": 2},
    "GPUMemoryIncrease": {"increase": 5, "patience": 5, "window": 3},
    "LossNotDecreasing": {"num_steps": 2, "diff_percent": 0.1},
    "Overtraining": {"patience_train": 5, "patience_validation": 5, "delta": 0.01},
    "Overfit": {"patience": 3, "ratio_threshold": 0.1},
}

# What each rule checks (the report's rule table) and what to do when it fires.
DESCRIPTION: Final[Mapping[str, str]] = {
    "LowGPUUtilization": "GPU utilization p95 below threshold_p95 (under-used) or p95 high and p5 low (fluctuating).",
    "CPUBottleneck": "GPU idle while CPU cores are busy, for more than `threshold` percent of the time.",
    "IOBottleneck": "GPU idle while I/O wait is high, for more than `threshold` percent of the time.",
    "GPUMemoryIncrease": "The moving average of GPU memory grows by more than `increase` points.",
    "BatchSize": "CPU, GPU and GPU memory all low at p95: the batch could grow or the instance shrink.",
    "LoadBalancing": "Utilization histograms of GPUs on a node differ (Jensen-Shannon distance above threshold).",
    "StepOutlier": "More than n_outliers steps longer than mean + stddev x standard deviation.",
    "MaxInitializationTime": "The first training step started more than `threshold` minutes after the job.",
    "Dataloader": "The median number of parallel dataloader processes is far from the number of cores.",
    "OverallSystemUsage": "Per-node percentiles of CPU, GPU, memory, network and I/O (never fires).",
    "LossNotDecreasing": "The loss did not decrease by diff_percent over num_steps steps.",
    "Overfit": "Validation loss exceeds training loss by more than ratio_threshold for `patience` evaluations.",
    "Overtraining": "Training or validation loss stopped improving by `delta` for the patience steps.",
    "StalledTrainingRule": "No new output (steps, scalars) for `threshold` seconds.",
    "VanishingGradient": "The mean absolute value of a gradient fell below `threshold`.",
    "ExplodingTensor": "A tensor holds NaN or infinity (only NaN with only_nan).",
    "DeadRelu": "More than threshold_layer percent of a layer's ReLUs were active for less than "
    "threshold_inactivity percent of the samples.",
    "PoorWeightInitialization": "In the first `steps` steps: activation-input variances differ across layers by more "
    "than `threshold`, gradients are too narrow (5th-95th percentile under distribution_range), or the loss stalls.",
    "SaturatedActivation": "More than threshold_layer percent of a tanh or sigmoid layer's units had their input "
    "outside the threshold range for all but threshold_inactivity percent of the samples.",
    "WeightUpdateRatio": "The ratio of a weight's update to the weight is above large_threshold or below "
    "small_threshold.",
    "AllZero": "At least `threshold` percent of a tensor's values are zero.",
    "ClassImbalance": "Once `samples` labels were seen: the largest class outnumbers the smallest more than "
    "threshold_imbalance times, or a class is mispredicted more often than threshold_misprediction.",
    "TensorVariance": "A tensor's variance is above max_threshold or below min_threshold.",
    "UnchangedTensor": "A tensor did not change (within rtol and atol) over num_steps steps.",
    "CheckInputImages": "A channel mean of the input images differs from 0 by more than threshold_mean: the "
    "inputs are not normalised.",
    "NLPSequenceRatio": "The share of a token (padding, unknown) in the input sequences is above its threshold.",
    "Confusion": "The confusion matrix of labels against predictions: a class's share on the diagonal under "
    "min_diag, or an off-diagonal share above max_off_diag.",
}

ADVICE: Final[Mapping[str, str]] = {
    "LowGPUUtilization": "Use a smaller instance type or fewer GPUs, or increase the batch size; if utilization "
    "fluctuates, look for stalls between steps (data loading, synchronisation, checkpointing).",
    "CPUBottleneck": "Move preprocessing off the training loop (precompute, cache, use more dataloader "
    "workers), or choose an instance with more vCPUs per GPU.",
    "IOBottleneck": "Use faster input: FastFile or Pipe mode, FSx for Lustre, larger/sharded files, prefetching.",
    "GPUMemoryIncrease": "Look for tensors kept across steps (accumulated losses, lists of outputs, graph "
    "retention); GPU memory should plateau after the first steps.",
    "BatchSize": "Increase the batch size (and learning rate accordingly) or run on a smaller instance.",
    "LoadBalancing": "Check the data sharding and the distributed strategy so each GPU gets the same work.",
    "StepOutlier": "Inspect the outlier steps: checkpointing, evaluation, garbage collection or slow data.",
    "MaxInitializationTime": "Shorten start-up: smaller images, data download in the background, FastFile mode.",
    "Dataloader": "Set num_workers close to the number of vCPUs per GPU process and pin_memory=True.",
    "OverallSystemUsage": "Use the per-node percentiles to size the instance.",
    "LossNotDecreasing": "Check the learning rate, the data pipeline (shuffling, labels) and the loss itself.",
    "Overfit": "Add regularisation or data augmentation, or stop earlier.",
    "Overtraining": "Stop training earlier (early stopping) or lower the learning rate.",
    "StalledTrainingRule": "Look at the training logs: a hang, a deadlock in distributed training or a slow step.",
    "VanishingGradient": "Use ReLU-family activations, residual connections or normalisation layers, and an "
    "initialisation scaled to the layer (He, Xavier); check that the loss is not saturated.",
    "ExplodingTensor": "Lower the learning rate, clip gradients, and look for a bad operation (log or sqrt of a "
    "non-positive value, division by zero) or bad input rows at the step that fired.",
    "DeadRelu": "Lower the learning rate, check the bias initialisation, or use LeakyReLU or ELU.",
    "PoorWeightInitialization": "Use an initialisation scaled to each layer (He for ReLU, Xavier for tanh) and "
    "check the input normalisation.",
    "SaturatedActivation": "Normalise the inputs, scale the initial weights down, or add normalisation layers "
    "before the tanh or sigmoid.",
    "WeightUpdateRatio": "Too large: lower the learning rate. Too small: raise it, or check for frozen or "
    "detached parameters.",
    "AllZero": "Check that the layer receives input and gradients (a detached graph, a mask, dead units).",
    "ClassImbalance": "Resample or weight the classes in the loss, and report per-class metrics.",
    "TensorVariance": "Check the initialisation and normalisation of the layer that owns the tensor.",
    "UnchangedTensor": "Check that the parameters are in the optimizer and require gradients, and that the "
    "learning rate is not zero.",
    "CheckInputImages": "Normalise the images (subtract the per-channel mean, divide by the standard deviation).",
    "NLPSequenceRatio": "Shorten the padding (bucket sequences by length) or grow the vocabulary.",
    "Confusion": "Look at the classes that fall off the diagonal: their data, their labels, their weight in "
    "the loss. Early in training every model falls short of the bar.",
}
