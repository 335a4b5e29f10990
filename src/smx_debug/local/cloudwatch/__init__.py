"""CloudWatch on the local AWS: alarm evaluation and GetMetricData at scale."""
