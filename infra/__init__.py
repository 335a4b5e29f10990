"""The smx-debug CDK app: configuration, Lambda asset staging, constructs and the guard stack."""
