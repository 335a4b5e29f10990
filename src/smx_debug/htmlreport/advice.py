"""What each rule checks and what to do when it fires (shown in the report's rule table)."""

from __future__ import annotations

__all__ = ["ADVICE", "DESCRIPTION"]

DESCRIPTION: dict[str, str] = {
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

ADVICE: dict[str, str] = {
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
