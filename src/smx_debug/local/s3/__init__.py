"""S3 on the local AWS: whole bucket policies evaluated by the local IAM."""
