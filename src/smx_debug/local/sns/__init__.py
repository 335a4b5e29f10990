"""SNS on the local AWS: deliveries authorized, Lambda subscriptions run in-process."""
