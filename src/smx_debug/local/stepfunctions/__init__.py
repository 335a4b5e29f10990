"""Step Functions on the local AWS: Lambda and SNS tasks of moto's interpreter, in-process and authorized."""
