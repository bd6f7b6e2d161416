-- Cron firings in time zones (PostgreSQL's timezone library), across
-- daylight-saving transitions in two zones, and window membership.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET timezone = 'UTC';

-- ordinary firings: Moscow (no DST), weekdays at 02:00
SELECT tms.cron_next('0 2 * * 1-5', '2026-11-27 03:00+03', 'Europe/Moscow');   -- Fri -> Mon
SELECT tms.cron_prev('0 2 * * 1-5', '2026-11-30 01:59+03', 'Europe/Moscow');   -- Mon night -> Fri
SELECT tms.cron_prev('0 2 * * 1-5', '2026-11-30 02:00+03', 'Europe/Moscow');   -- at a firing: itself
SELECT tms.cron_next('*/15 * * * *', '2026-12-31 23:50', 'UTC');
SELECT tms.cron_next('0 0 29 2 *', '2025-03-01', 'UTC');
SELECT tms.cron_next('0 0 30 2 *', '2025-03-01', 'UTC') IS NULL AS never;
SELECT tms.cron_next('0 12 * JAN,jul SUN', '2026-06-01', 'UTC');
SELECT tms.cron_next('0 0 13 * 5', '2026-11-01', 'UTC');   -- day 13 OR Friday

-- Europe/Berlin, spring forward 2024-03-31 02:00 CET -> 03:00 CEST:
-- 02:30 does not exist and is read with the offset before the jump (03:30 CEST)
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('30 2 * * *', '2024-03-30 12:00+00', 'Europe/Berlin') f;
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('30 2 * * *', '2024-03-31 12:00+00', 'Europe/Berlin') f;
-- hourly across the jump: 01:00 CET, then 03:00 CEST (02:00 is 03:00 CEST too: once)
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('0 * * * *', '2024-03-31 00:00+00', 'Europe/Berlin') f;
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('0 * * * *', '2024-03-31 00:30+00', 'Europe/Berlin') f;
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('0 * * * *', '2024-03-31 01:00+00', 'Europe/Berlin') f;
-- fall back 2024-10-27 03:00 CEST -> 02:00 CET: 02:30 happens twice and fires once,
-- at the second occurrence (the offset after the transition)
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('30 2 * * *', '2024-10-26 12:00+00', 'Europe/Berlin') f;
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('30 2 * * *', '2024-10-27 00:45+00', 'Europe/Berlin') f;   -- 02:45 CEST: still ahead
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_next('30 2 * * *', '2024-10-27 01:30+00', 'Europe/Berlin') f;   -- fired: next day
SELECT f AT TIME ZONE 'Europe/Berlin' AS local, f
  FROM tms.cron_prev('30 2 * * *', '2024-10-27 01:29+00', 'Europe/Berlin') f;   -- not yet: the day before
-- America/New_York, spring forward 2024-03-10 02:00 EST -> 03:00 EDT, fall back 2024-11-03
SELECT f AT TIME ZONE 'America/New_York' AS local, f
  FROM tms.cron_next('15 2 * * *', '2024-03-09 12:00-05', 'America/New_York') f;
SELECT f AT TIME ZONE 'America/New_York' AS local, f
  FROM tms.cron_next('15 2 * * *', '2024-03-10 12:00-04', 'America/New_York') f;
SELECT f AT TIME ZONE 'America/New_York' AS local, f
  FROM tms.cron_next('15 1 * * *', '2024-11-03 00:00-04', 'America/New_York') f;   -- 01:15 twice: EST
SELECT f AT TIME ZONE 'America/New_York' AS local, f
  FROM tms.cron_prev('15 1 * * *', '2024-11-03 05:14+00', 'America/New_York') f;   -- before 01:15 EST
-- every firing of a day with a transition, hourly, in New York (23 and 25 hour days)
SELECT count(*) AS spring_day
  FROM generate_series('2024-03-10 00:00-05'::timestamptz, '2024-03-10 23:59-04', '1 minute') t
 WHERE tms.cron_prev('0 * * * *', t, 'America/New_York') > t - interval '1 minute';
SELECT count(*) AS autumn_day
  FROM generate_series('2024-11-03 00:00-04'::timestamptz, '2024-11-03 23:59-05', '1 minute') t
 WHERE tms.cron_prev('0 * * * *', t, 'America/New_York') > t - interval '1 minute';

-- errors
SELECT tms.cron_next('0 2 * * 1-5', now(), 'Mars/Olympus');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.cron_next('0 2 * * mon-xyz', now(), 'UTC');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.cron_next('61 2 * * *', now(), 'UTC');
\echo :LAST_ERROR_SQLSTATE

-- window membership: previous firing <= at < previous firing + duration
\set w '{"time-zone-id": "Europe/Moscow", "periods": [{"cron": "0 2 * * 1-5", "duration": 14400000}]}'
SELECT at, tms.window_open(:'w', at) AS open
  FROM unnest(ARRAY['2026-11-30 01:59:59+03', '2026-11-30 02:00:00+03', '2026-11-30 05:59:59+03',
                    '2026-11-30 06:00:00+03', '2026-11-29 03:00:00+03']::timestamptz[]) at;
-- two periods; a duration longer than the interval between firings
\set w2 '{"time-zone-id": "UTC", "periods": [{"cron": "0 22 * * *", "duration": 7200000}, {"cron": "0 */6 * * 6,0", "duration": 25200000}]}'
SELECT at, tms.window_open(:'w2', at) AS open
  FROM unnest(ARRAY['2026-11-25 22:30+00', '2026-11-26 00:00+00', '2026-11-26 10:00+00',
                    '2026-11-28 10:00+00', '2026-11-30 00:30+00', '2026-11-30 01:00+00']::timestamptz[]) at;
-- a window across the Berlin spring jump: opens 01:00 CET for 3 h of real time
\set w3 '{"time-zone-id": "Europe/Berlin", "periods": [{"cron": "0 1 * * *", "duration": 10800000}]}'
SELECT at, tms.window_open(:'w3', at) AS open
  FROM unnest(ARRAY['2024-03-31 00:00+00', '2024-03-31 02:59+00', '2024-03-31 03:00+00']::timestamptz[]) at;
SELECT tms.window_open(NULL) AS no_window_is_open;
