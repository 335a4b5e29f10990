-- Idle GPU hours and what they cost, by job, team tag, instance type and day.
-- A GPU is idle in a minute when its mean utilisation is below $idle_threshold percent; a CloudWatch host row
-- stands for the host's GPUs (devices). Cost: idle hours x the instance's price per hour / its GPUs.
SELECT
  s.job,
  j.team,
  j.instance_type,
  CAST(date_trunc('day', s.minute) AS DATE) AS day,
  CAST(sum(s.devices) AS DOUBLE) / 60 AS idle_gpu_hours,
  CAST(sum(s.devices) AS DOUBLE) / 60 * max(j.price_per_hour) / max(nullif(j.gpus_per_instance, 0)) AS idle_cost_usd
FROM system_minutes AS s
LEFT JOIN training_jobs AS j ON j.job = s.job
WHERE s.hour >= $since_hour
  AND s.minute >= $since
  AND s.dimension = 'GPUUtilization'
  AND s.value_avg < $idle_threshold
GROUP BY s.job, j.team, j.instance_type, CAST(date_trunc('day', s.minute) AS DATE)
ORDER BY idle_cost_usd DESC NULLS LAST, s.job, day
