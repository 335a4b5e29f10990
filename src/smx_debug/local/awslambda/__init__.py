"""Lambda on the local AWS: handlers in-process, Lambda's context and limits, SQS event source mappings."""
