-- The dataset's files of system minutes: rows, jobs and minutes per file (what a query scans; compaction).
SELECT
  filename AS file,
  count(*) AS row_count,
  count(DISTINCT job) AS jobs,
  min(minute) AS first_minute,
  max(minute) AS last_minute
FROM system_minutes
WHERE hour >= $since_hour
GROUP BY filename
ORDER BY file
