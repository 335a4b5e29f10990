"""Discovery's requests against botocore's SageMaker model (STYLE 3)."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.validate import ParamValidator

from smx_debug.contracts import MANAGED_TAG
from smx_debug.watch.discover import SEARCH_PAGE, search_request


@pytest.mark.parametrize("tag_key", [MANAGED_TAG, "team:opt-in"])
def test_discovery_search_request_is_valid_for_botocore(tag_key: str) -> None:
    model = botocore.session.get_session().get_service_model("sagemaker").operation_model("Search")
    request = {**search_request(tag_key), "MaxResults": SEARCH_PAGE}
    report = ParamValidator().validate(request, model.input_shape)
    assert not report.has_errors(), report.generate_report()
    assert request == {
        "Resource": "TrainingJob",
        "SearchExpression": {"Filters": [
            {"Name": "TrainingJobStatus", "Operator": "Equals", "Value": "InProgress"},
            {"Name": f"Tags.{tag_key}", "Operator": "Exists"},
        ]},
        "MaxResults": 100,
    }
