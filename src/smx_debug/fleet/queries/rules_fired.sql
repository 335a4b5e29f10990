-- Jobs whose rules fired, by rule: one row per rule configuration and job, with its triggers and their first
-- and last time (Debugger's rule jobs and smx-debug's evaluator alike).
SELECT
  v.rule,
  max(v.rule_type) AS rule_type,
  v.job,
  j.team,
  count(*) AS triggers,
  min(v.time) AS first_trigger,
  max(v.time) AS last_trigger
FROM verdicts AS v
LEFT JOIN training_jobs AS j ON j.job = v.job
WHERE v.hour >= $since_hour
  AND v.time >= $since
  AND v.event = 'trigger'
GROUP BY v.rule, v.job, j.team
ORDER BY v.rule, first_trigger, v.job
