"""200 shuffled, duplicated, out-of-order events over 20 jobs: each eligible job is stopped exactly once."""

from __future__ import annotations

import random
from dataclasses import dataclass

from actions_support import LAMBDAS, Stack, client, create_job

from smx_debug.local import extensions as ext

RULE = "ExplodingTensor"


@dataclass(frozen=True)
class Case:
    prefix: str  # "watch-" is watched by name
    managed: bool  # opt-in tag
    stop_rule: str | None  # the rule whose tag says stop
    fires: bool  # RULE reaches IssuesFound
    finished: bool  # the job completed before the events arrive

    def eligible(self) -> bool:
        watched = self.prefix == "watch-" or self.managed
        return watched and self.stop_rule == RULE and self.fires and not self.finished


CASES = (
    [Case("watch-", False, RULE, True, False)] * 6  # watched by prefix
    + [Case("other-", True, RULE, True, False)] * 4  # watched by opt-in tag
    + [Case("other-", False, RULE, True, False)] * 2  # not watched
    + [Case("watch-", False, None, True, False)] * 2  # rule asks for notify only
    + [Case("watch-", False, RULE, True, True)] * 2  # already finished
    + [Case("watch-", False, RULE, False, False)] * 2  # rule never fires
    + [Case("watch-", False, "OtherRule", True, False)] * 2  # another rule asks for stop
)


def test_replay_of_shuffled_duplicated_events_stops_each_eligible_job_exactly_once(stack: Stack) -> None:
    aws = stack.aws
    assert len(CASES) == 20
    events, names = [], []
    for i, case in enumerate(CASES):
        name = f"{case.prefix}job-{i:02d}"
        names.append(name)
        tags = {"smx-debug:on:" + (case.stop_rule or RULE): "stop" if case.stop_rule else "notify"}
        if case.managed:
            tags["smx-debug:managed"] = "true"
        create_job(aws, name, tags, rules=(RULE, "OtherRule"))
        events.append(ext.state_change_event(aws, name))  # early: everything InProgress
        if case.fires:
            ext.set_rule_statuses(
                aws,
                name,
                debug=[
                    ext.rule_status(RULE, "IssuesFound", step=100 + i),
                    ext.rule_status("OtherRule", "InProgress"),
                ],
            )
        events.append(ext.state_change_event(aws, name))
        if case.finished:
            ext.set_training_job_status(aws, name, "Completed")
    rng = random.Random(20261122)
    replay = events + rng.choices(events, k=200 - len(events))
    rng.shuffle(replay)
    assert len(replay) == 200

    env = stack.env(SMX_WATCH_PREFIXES="watch-,team-a-")
    for event in replay:
        (delivery,) = ext.deliver_event(aws, event, {"stop_training": env}, lambdas_dir=LAMBDAS)
        assert delivery.error is None

    calls = {name: ext.stop_calls(aws, name) for name in names}
    assert calls == {name: int(case.eligible()) for name, case in zip(names, CASES, strict=True)}
    sagemaker = client(aws, "sagemaker")
    statuses = {
        name: sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] for name in names
    }
    expected_status = {
        name: ("Stopped" if case.eligible() else "Completed" if case.finished else "InProgress")
        for name, case in zip(names, CASES, strict=True)
    }
    assert statuses == expected_status
