-- Time to stop after a trigger: per stopped job, its first rule trigger, the stop action that followed and
-- the seconds between them.
WITH triggers AS (
  SELECT job, min(time) AS first_trigger, arg_min(rule, time) AS rule
  FROM verdicts
  WHERE hour >= $since_hour AND time >= $since AND event = 'trigger'
  GROUP BY job
),
stops AS (
  SELECT job, min(time) AS stopped_at
  FROM verdicts
  WHERE hour >= $since_hour AND time >= $since AND event = 'action' AND action = 'stop'
    AND verdict NOT IN ('failed', 'skipped')
  GROUP BY job
)
SELECT
  t.job,
  j.team,
  t.rule,
  t.first_trigger,
  s.stopped_at,
  date_diff('second', t.first_trigger, s.stopped_at) AS seconds_to_stop
FROM triggers AS t
JOIN stops AS s ON s.job = t.job
LEFT JOIN training_jobs AS j ON j.job = t.job
ORDER BY seconds_to_stop DESC, t.job
