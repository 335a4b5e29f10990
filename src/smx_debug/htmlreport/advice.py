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
}
