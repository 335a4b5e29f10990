"""CloudFormation on the local AWS: a synthesized stack deployed onto moto."""
