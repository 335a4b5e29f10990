-- The top $n jobs by the cost of their idle GPUs since $since: GPU hours, idle GPU hours, the idle share and
-- its cost (a GPU is idle in a minute when its mean utilisation is below $idle_threshold percent).
WITH gpu AS (
  SELECT
    s.job,
    CAST(sum(s.devices) AS DOUBLE) / 60 AS gpu_hours,
    CAST(sum(CASE WHEN s.value_avg < $idle_threshold THEN s.devices ELSE 0 END) AS DOUBLE) / 60 AS idle_gpu_hours
  FROM system_minutes AS s
  WHERE s.hour >= $since_hour
    AND s.minute >= $since
    AND s.dimension = 'GPUUtilization'
  GROUP BY s.job
),
costed AS (
  SELECT
    g.job,
    j.team,
    j.instance_type,
    j.instance_count,
    g.gpu_hours,
    g.idle_gpu_hours,
    g.idle_gpu_hours / nullif(g.gpu_hours, 0) AS idle_share,
    g.idle_gpu_hours * j.price_per_hour / nullif(j.gpus_per_instance, 0) AS idle_cost_usd
  FROM gpu AS g
  LEFT JOIN training_jobs AS j ON j.job = g.job
),
ranked AS (
  SELECT
    c.*,
    row_number() OVER (ORDER BY c.idle_cost_usd DESC NULLS LAST, c.idle_gpu_hours DESC, c.job) AS wasted_rank
  FROM costed AS c
)
SELECT *
FROM ranked
WHERE wasted_rank <= $n
ORDER BY wasted_rank
