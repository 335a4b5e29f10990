"""EventBridge on the local AWS: events and schedule ticks delivered to Lambda targets."""
