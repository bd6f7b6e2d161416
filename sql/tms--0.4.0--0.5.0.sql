-- tms 0.4.0 -> 0.5.0
--
-- What changed, and what this script does about it:
--

\echo Use "ALTER EXTENSION tms UPDATE TO '0.5.0'" to load this file. \quit
