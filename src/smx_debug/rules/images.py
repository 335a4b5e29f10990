"""Rule evaluator images per region (the ``sagemaker-debugger-rules`` ECR repository).

Source: the SageMaker Python SDK 2.257.7, ``sagemaker/image_uri_config/debugger.json`` (the same
table as https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-docker-images-rules.html). A test
compares it with the installed SDK so drift is caught.
"""

from __future__ import annotations

from smx_debug.errors import ConfigError

REPOSITORY = "sagemaker-debugger-rules"
TAG = "latest"

RULE_IMAGE_ACCOUNTS: dict[str, str] = {
    "af-south-1": "314341159256",
    "ap-east-1": "199566480951",
    "ap-northeast-1": "430734990657",
    "ap-northeast-2": "578805364391",
    "ap-northeast-3": "479947661362",
    "ap-south-1": "904829902805",
    "ap-southeast-1": "972752614525",
    "ap-southeast-2": "184798709955",
    "ca-central-1": "519511493484",
    "cn-north-1": "618459771430",
    "cn-northwest-1": "658757709296",
    "eu-central-1": "482524230118",
    "eu-north-1": "314864569078",
    "eu-south-1": "563282790590",
    "eu-west-1": "929884845733",
    "eu-west-2": "250201462417",
    "eu-west-3": "447278800020",
    "me-south-1": "986000313247",
    "sa-east-1": "818342061345",
    "us-east-1": "503895931360",
    "us-east-2": "915447279597",
    "us-gov-west-1": "515509971035",
    "us-west-1": "685455198987",
    "us-west-2": "895741380848",
}


def rule_evaluator_image(region: str) -> str:
    """The rule evaluator image URI for ``region``; an unsupported region is a ConfigError."""
    account = RULE_IMAGE_ACCOUNTS.get(region)
    if account is None:
        raise ConfigError(
            f"region: Debugger rules are not available in {region!r}; "
            f"supported regions: {', '.join(sorted(RULE_IMAGE_ACCOUNTS))}",
            field="region",
            value=region,
        )
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{REPOSITORY}:{TAG}"
