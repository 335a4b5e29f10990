"""Actions a rule triggers: built-in ones (rendered into ``action_json``) and ours (training-job tags).

Built-in, carried out by the Debugger rule container:
``stop_training`` (optional ``training_job_prefix``), ``email`` (an address) and ``sms`` (E.164).
Ours, carried out by the smx-debug Lambdas through the tags of :mod:`smx_debug.tags`:
``stop_job`` (stop exactly this job), ``notify`` (the deployment's topic, or ``topic_arn``) and
``retrain`` (start the retraining workflow).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import StrictStr, model_validator
from pydantic_core import PydanticCustomError

from smx_debug.config.base import FrozenModel
from smx_debug.tags import ActionSpec

# The rule container's own checks (smdebug_rulesconfig/actions/utils.py). The container also
# lower-cases the whole action string before parsing it.
_PREFIX = re.compile(r"^[A-Za-z0-9\-]+$")
_EMAIL = re.compile(r"^[a-z0-9]+[@]\w+[.]\w{2,3}$")
_PHONE = re.compile(r"^\+\d{1,15}$")
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")
# RuleParameters values are limited to 256 characters; action_json is one of them.
ACTION_JSON_MAX_LEN = 256

_KINDS = ("stop_training", "email", "sms", "stop_job", "notify", "retrain")


class StopTrainingAction(FrozenModel):
    """Built-in stop: the container stops the one running job whose name starts with the prefix."""

    training_job_prefix: StrictStr | None = None

    @model_validator(mode="after")
    def _check(self) -> StopTrainingAction:
        prefix = self.training_job_prefix
        if prefix is not None and not _PREFIX.match(prefix):
            raise PydanticCustomError(
                "smx_prefix",
                "training_job_prefix '{value}': the rule container accepts letters, digits and hyphens only",
                {"value": prefix},
            )
        return self


class NotifyAction(FrozenModel):
    """Ours: publish to the deployment's SNS topic, or to ``topic_arn``."""

    topic_arn: StrictStr | None = None

    @model_validator(mode="after")
    def _check(self) -> NotifyAction:
        if self.topic_arn is not None and not _TOPIC_ARN.match(self.topic_arn):
            raise PydanticCustomError(
                "smx_topic", "topic_arn '{value}' is not an SNS topic ARN", {"value": self.topic_arn}
            )
        return self


class _NoOptions(FrozenModel):
    """An action without options (``retrain: {}``, ``stop_job: {}``)."""


class RuleAction(FrozenModel):
    """Exactly one action. YAML: ``- stop_training: {}``, ``- email: a@b.com``, ``- notify: {}``."""

    stop_training: StopTrainingAction | None = None
    email: StrictStr | None = None
    sms: StrictStr | None = None
    stop_job: _NoOptions | None = None
    notify: NotifyAction | None = None
    retrain: _NoOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # `- retrain` (a bare word) means `- retrain: {}`; `- notify: arn:...` means topic_arn.
        if isinstance(data, str) and data in _KINDS:
            return {data: {}}
        if isinstance(data, dict):
            data = dict(data)
            for key in ("stop_training", "stop_job", "notify", "retrain"):
                if key in data and data[key] is None:
                    data[key] = {}
            if isinstance(data.get("notify"), str):
                data["notify"] = {"topic_arn": data["notify"]}
            if isinstance(data.get("stop_training"), str):
                data["stop_training"] = {"training_job_prefix": data["stop_training"]}
        return data

    @model_validator(mode="after")
    def _check(self) -> RuleAction:
        given = [k for k in _KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                "smx_action",
                "each action is exactly one of {kinds} (got {given})",
                {"kinds": ", ".join(_KINDS), "given": ", ".join(given) or "none"},
            )
        if self.email is not None and not _EMAIL.match(self.email):
            raise PydanticCustomError(
                "smx_email",
                "email '{value}' is not accepted by the Debugger rule container: it takes name@domain.tld "
                "with lower-case letters and digits before '@', one domain label and a 2-3 letter "
                "top-level domain (the address must also confirm the SNS subscription to topic "
                "SMDebugRules); for other addresses use `notify` with your own SNS topic",
                {"value": self.email},
            )
        if self.sms is not None and not _PHONE.match(self.sms):
            raise PydanticCustomError(
                "smx_sms",
                "sms '{value}' is not an E.164 phone number ('+' then up to 15 digits, no spaces)",
                {"value": self.sms},
            )
        return self

    @property
    def kind(self) -> str:
        """Which action this is (the YAML key)."""
        return next(k for k in _KINDS if getattr(self, k) is not None)

    @property
    def builtin(self) -> bool:
        """True for actions the rule container carries out (rendered into action_json)."""
        return self.kind in ("stop_training", "email", "sms")

    def tag_spec(self) -> ActionSpec | None:
        """The tag encoding of a custom action (None for built-in actions)."""
        if self.stop_job is not None:
            return ActionSpec("stop")
        if self.notify is not None:
            return ActionSpec("notify", self.notify.topic_arn)
        if self.retrain is not None:
            return ActionSpec("retrain")
        return None

    def action_parameters(self, job_name: str | None) -> dict[str, str]:
        """The container's parameter dict, keys in the order smdebug_rulesconfig emits them."""
        if self.stop_training is not None:
            prefix = self.stop_training.training_job_prefix
            if prefix is not None:
                return {"training_job_prefix": prefix, "name": "stoptraining"}
            if job_name is not None:
                # the SDK fills the job name in after construction, so it comes second
                return {"name": "stoptraining", "training_job_prefix": job_name}
            return {"name": "stoptraining"}
        if self.email is not None:
            return {"endpoint": self.email, "name": "email"}
        if self.sms is not None:
            return {"endpoint": self.sms, "name": "sms"}
        raise ValueError(f"{self.kind} is not a built-in action")


def render_action_json(actions: list[RuleAction], job_name: str | None) -> str:
    """Serialize built-in actions exactly as ``smdebug_rulesconfig.ActionList.serialize`` does."""
    parts = []
    for action in actions:
        params = action.action_parameters(job_name)
        parts.append("{" + ", ".join(f'\\"{k}\\": \\"{v}\\"' for k, v in params.items()) + "}")
    return "[" + ", ".join(parts) + "]"
