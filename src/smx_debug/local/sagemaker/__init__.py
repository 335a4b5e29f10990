"""SageMaker on the local AWS: training jobs, their roles, Search, rule statuses, metrics and runs."""
