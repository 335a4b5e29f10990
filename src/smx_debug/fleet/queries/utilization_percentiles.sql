-- Utilisation percentiles per instance type (right-sizing): GPU, GPU memory and CPU, over device-minutes
-- (each row's mean for the minute). Exact on DuckDB; on Athena approx_percentile (see docs/fleet.md).
SELECT
  j.instance_type,
  s.dimension,
  count(DISTINCT s.job) AS jobs,
  count(*) AS device_minutes,
  avg(s.value_avg) AS mean,
  median(s.value_avg) AS p50,
  quantile_cont(s.value_avg, 0.9) AS p90,
  quantile_cont(s.value_avg, 0.95) AS p95,
  quantile_cont(s.value_avg, 0.99) AS p99
FROM system_minutes AS s
JOIN training_jobs AS j ON j.job = s.job
WHERE s.hour >= $since_hour
  AND s.minute >= $since
  AND s.dimension IN ('GPUUtilization', 'GPUMemoryUtilization', 'CPUUtilization')
GROUP BY j.instance_type, s.dimension
ORDER BY j.instance_type, s.dimension
