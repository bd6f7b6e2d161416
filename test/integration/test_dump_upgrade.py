"""
test_dump_upgrade.py -- a tms installation survives pg_dump and restore,
ALTER EXTENSION UPDATE and pg_upgrade (doc/architecture.md, "Data model").

  - dump and restore: a database with groups, policies, rules, known
    tables, an evaluation log, maintenance jobs, rule versions, budgets, a PENDING purge job with
    the storage credentials its catalog vended, a SQL task kind and
    scheduled tasks is dumped (pg_dump -Fc) and restored into another
    cluster; there every table with a sequence takes new rows (the
    sequences were dumped), the policies are evaluated again by their
    tasks, and the purge job resumes and succeeds with the captured
    credentials; a JdbcCatalog table of pointers with tms's trigger keeps
    it, and its commits are events again;
  - upgrade: tms 0.1.0 with data, updated to the current version, equals
    a fresh installation object by object (functions, views, tables by
    column name, constraints, indexes, sequences, grants, comments,
    extension membership, pg_extension_config_dump entries), its data is
    migrated, and the workers run it; every C symbol an install or
    upgrade script names is in the library; the generated update script
    (scripts/sql-gen.sh) is the last step from 0.5.0 and from 0.6.0, and
    either ends equal to a fresh installation, SET search_path included;
    the generator puts the drops a fragment lists first and refuses a
    statement that cannot run twice among the idempotent files;
  - pg_upgrade: a postmaster in binary-upgrade mode (-b, as pg_upgrade
    starts it) starts no tms process, and a real pg_upgrade between two
    PostgreSQL 15 clusters with tms preloaded keeps tms's data and
    workers.

Run: /usr/bin/python3 -m pytest test/integration/test_dump_upgrade.py
"""

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import BINDIR, FAST_WORKERS, Cluster, _as_server_user, \
    _chown_to_server_user, free_port, wait_for  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FAST = dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "'1s'"})


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (
        " ".join(cmd), r.returncode, r.stdout[-4000:], r.stderr[-4000:])
    return r


# ---------------------------------------------------------------------------
# the shape of an installed extension
# ---------------------------------------------------------------------------

# One row per property that an installation must have the same in an
# updated and a fresh database: (key, jsonb).  Tables are compared column
# by column name (an update appends columns); @ACL(acl)@ stands for an ACL
# as a sorted list of items (their order in the array is not a property of
# the object).
SHAPE_SQL = r"""
WITH ext AS (SELECT oid, extconfig, extcondition FROM pg_extension WHERE extname = 'tms'),
members AS (
    SELECT d.classid, d.objid, (pg_identify_object(d.classid, d.objid, 0)).*
      FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
       AND d.deptype = 'e'
)
SELECT 'member ' || m.type || ' ' || m.identity,
       jsonb_strip_nulls(jsonb_build_object(
         'comment', obj_description(m.objid, m.classid::regclass::text),
         'function', CASE WHEN m.classid = 'pg_proc'::regclass THEN (
             SELECT jsonb_build_object(
                      'definition', regexp_replace(pg_get_functiondef(p.oid), '\s+', ' ', 'g'),
                      'acl', @ACL(p.proacl)@,
                      'owner', p.proowner::regrole::text)
               FROM pg_proc p WHERE p.oid = m.objid) END,
         'relation', CASE WHEN m.classid = 'pg_class'::regclass THEN (
             SELECT jsonb_build_object(
                      'kind', c.relkind, 'acl', @ACL(c.relacl)@, 'options', c.reloptions::text,
                      'owner', c.relowner::regrole::text,
                      'persistence', c.relpersistence, 'rls', c.relrowsecurity,
                      'columns', (SELECT jsonb_object_agg(a.attname, jsonb_strip_nulls(jsonb_build_object(
                                     'type', format_type(a.atttypid, a.atttypmod),
                                     'not_null', a.attnotnull,
                                     'default', pg_get_expr(ad.adbin, ad.adrelid),
                                     'identity', nullif(a.attidentity, ''),
                                     'generated', nullif(a.attgenerated, ''),
                                     'collation', CASE WHEN a.attcollation <> 0
                                                       THEN a.attcollation::regcollation::text END,
                                     'acl', @ACL(a.attacl)@,
                                     'comment', col_description(a.attrelid, a.attnum))))
                                    FROM pg_attribute a
                                    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid
                                                           AND ad.adnum = a.attnum
                                   WHERE a.attrelid = c.oid AND a.attnum > 0
                                     AND NOT a.attisdropped),
                      'constraints', (SELECT jsonb_object_agg(co.conname, pg_get_constraintdef(co.oid))
                                        FROM pg_constraint co WHERE co.conrelid = c.oid),
                      'indexes', (SELECT jsonb_object_agg(i.relname, pg_get_indexdef(x.indexrelid))
                                    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                                   WHERE x.indrelid = c.oid),
                      'triggers', (SELECT jsonb_object_agg(t.tgname, pg_get_triggerdef(t.oid))
                                     FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
                      'view', CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END,
                      'sequence', (SELECT jsonb_build_object(
                                     'type', s.seqtypid::regtype::text, 'start', s.seqstart,
                                     'increment', s.seqincrement, 'max', s.seqmax, 'min', s.seqmin,
                                     'cache', s.seqcache, 'cycle', s.seqcycle,
                                     'owned_by', (SELECT d.refobjid::regclass::text || '.' || a.attname
                                                    FROM pg_depend d
                                                    JOIN pg_attribute a ON a.attrelid = d.refobjid
                                                                       AND a.attnum = d.refobjsubid
                                                   WHERE d.classid = 'pg_class'::regclass
                                                     AND d.objid = c.oid
                                                     AND d.refclassid = 'pg_class'::regclass
                                                     AND d.deptype IN ('a', 'i')))
                                     FROM pg_sequence s WHERE s.seqrelid = c.oid))
               FROM pg_class c WHERE c.oid = m.objid) END,
         'schema', CASE WHEN m.classid = 'pg_namespace'::regclass THEN (
             SELECT jsonb_build_object('acl', @ACL(n.nspacl)@, 'owner', n.nspowner::regrole::text)
               FROM pg_namespace n WHERE n.oid = m.objid) END,
         'wrapper', CASE WHEN m.classid = 'pg_foreign_data_wrapper'::regclass THEN (
             SELECT jsonb_build_object('handler', w.fdwhandler::regproc::text,
                                       'validator', w.fdwvalidator::regproc::text,
                                       'options', w.fdwoptions::text, 'acl', @ACL(w.fdwacl)@)
               FROM pg_foreign_data_wrapper w WHERE w.oid = m.objid) END,
         'type', CASE WHEN m.classid = 'pg_type'::regclass THEN (
             SELECT jsonb_build_object('typtype', t.typtype, 'acl', @ACL(t.typacl)@)
               FROM pg_type t WHERE t.oid = m.objid) END
       ))
  FROM members m
UNION ALL
-- everything in the schema, member or not: nothing is left behind
SELECT 'in schema tms: ' || (pg_identify_object('pg_class'::regclass, c.oid, 0)).identity,
       jsonb_build_object('member', EXISTS (SELECT 1 FROM members m
                                             WHERE m.classid = 'pg_class'::regclass
                                               AND m.objid = c.oid))
  FROM pg_class c
 WHERE c.relnamespace = 'tms'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'S', 'f', 'p', 'c')
UNION ALL
SELECT 'in schema tms: ' || p.oid::regprocedure::text,
       jsonb_build_object('member', EXISTS (SELECT 1 FROM members m
                                             WHERE m.classid = 'pg_proc'::regclass
                                               AND m.objid = p.oid))
  FROM pg_proc p WHERE p.pronamespace = 'tms'::regnamespace
UNION ALL
SELECT 'pg_extension_config_dump ' || u.cfg::regclass::text,
       jsonb_build_object('condition', u.cond)
  FROM ext, unnest(ext.extconfig, ext.extcondition) AS u(cfg, cond)
UNION ALL
SELECT 'extension', jsonb_build_object('schema', extnamespace::regnamespace::text,
                                       'relocatable', extrelocatable, 'version', extversion)
  FROM pg_extension WHERE extname = 'tms'
UNION ALL
-- the rows the install script puts in: the built-in kinds and their slots
SELECT 'built-in task kind ' || k.kind,
       jsonb_build_object('handler', k.handler::text, 'max_concurrency', k.max_concurrency,
                          'slots', (SELECT count(*) FROM tms.task_slots s WHERE s.kind = k.kind))
  FROM tms.task_kinds k WHERE k.builtin
""".replace("@ACL(", "(SELECT array_agg(x ORDER BY x::text) FROM unnest(").replace(")@", ") x)::text")


def shape(cluster, dbname):
    return dict(cluster.query(SHAPE_SQL, dbname=dbname))


def differences(a, b, a_name, b_name):
    """Readable differences between two shapes (empty when equal)."""
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in a:
            out.append("only in %s: %s %s" % (b_name, k, json.dumps(b[k], sort_keys=True)[:300]))
        elif k not in b:
            out.append("only in %s: %s %s" % (a_name, k, json.dumps(a[k], sort_keys=True)[:300]))
        elif a[k] != b[k]:
            fa = json.dumps(a[k], indent=1, sort_keys=True).splitlines()
            fb = json.dumps(b[k], indent=1, sort_keys=True).splitlines()
            out.append("differs: %s\n%s" % (k, "\n".join(
                difflib.unified_diff(fa, fb, a_name, b_name, lineterm="", n=2))))
    return out


def assert_equals_a_fresh_install(c):
    """The tms of c's database tms_regress has the shape of a fresh
    CREATE EXTENSION tms in a new database "fresh" of the same cluster."""
    c.create_database("fresh")
    c.query("CREATE EXTENSION tms", dbname="fresh")
    upgraded, fresh = shape(c, "tms_regress"), shape(c, "fresh")
    assert len(fresh) > 150
    diff = differences(upgraded, fresh, "upgraded", "fresh")
    assert not diff, "the updated installation differs from a fresh one:\n\n" + "\n\n".join(diff)


# ---------------------------------------------------------------------------
# ALTER EXTENSION tms UPDATE
# ---------------------------------------------------------------------------

def script_symbols():
    """C symbols named by every install and upgrade script of sql/ and by
    the generated install script of the current version."""
    syms = {}
    scripts = [os.path.join(REPO, "sql", f) for f in os.listdir(os.path.join(REPO, "sql"))
               if f.startswith("tms--")]
    for sub in ("install", "updates"):
        for d, _, files in os.walk(os.path.join(REPO, "sql", sub)):
            scripts += [os.path.join(d, f) for f in files if f.endswith(".sql")]
    for path in scripts:
        with open(path) as f:
            for sym in re.findall(r"'MODULE_PATHNAME',\s*'([A-Za-z0-9_]+)'", f.read()):
                syms.setdefault(sym, os.path.relpath(path, REPO))
    return syms


def test_every_symbol_a_script_names_is_in_the_library():
    libdir = subprocess.run(["pg_config", "--pkglibdir"], capture_output=True, text=True,
                            check=True).stdout.strip()
    nm = run(["nm", "-D", "--defined-only", os.path.join(libdir, "tms.so")]).stdout
    defined = {line.split()[-1] for line in nm.splitlines() if line.strip()}
    syms = script_symbols()
    assert len(syms) > 20 and "tms_api_call" in syms
    missing = {s: where for s, where in syms.items() if s not in defined}
    assert not missing, "C symbols named by scripts but not in tms.so: %s" % missing


V010_DATA = """
CREATE ROLE app;
CREATE SERVER up_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %(uri)s,
    allowed_locations 'file:///nowhere/', request_timeout '10s', retries '0');
GRANT USAGE ON FOREIGN SERVER up_srv TO app;
CREATE USER MAPPING FOR app SERVER up_srv;
INSERT INTO tms.object_groups (name, server, namespace_pattern, owner)
    VALUES ('up-g', 'up_srv', %(ns)s, 'app');
INSERT INTO tms.maintenance_policies (name, group_id, owner, description)
    SELECT 'up-p', id, 'app', 'from 0.1.0' FROM tms.object_groups WHERE name = 'up-g';
INSERT INTO tms.maintenance_rules (policy_id, operation, engine, commits_threshold,
                                   condition, needs, baseline_mode)
    SELECT id, 'snapshot-expiry', 'local', 1, 'snapshots > 100', 'metadata', 'catch-up'
      FROM tms.maintenance_policies WHERE name = 'up-p';
-- a job of a role that exists, with its task (due tomorrow: the workers
-- leave it alone), and a finished one of a role that no longer exists
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                     metadata_location, created_by)
    VALUES ('up_srv', 'ns', 'pending', '/nowhere/pending', '/nowhere/pending/v1.metadata.json', 'app');
INSERT INTO tms.scheduled_tasks (task_name, task_instance, execution_time)
    SELECT 'purge', id::text, now() + interval '1 day' FROM tms.iceberg_cleanup_job
     WHERE table_name = 'pending';
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                     metadata_location, created_by, state, finished_at,
                                     phase, files_deleted)
    VALUES ('up_srv', 'ns', 'done', '/nowhere/done', '/nowhere/done/v1.metadata.json',
            'gone_role', 'SUCCEEDED', now(), 'metadata', 7);
"""


def test_update_from_0_1_0_equals_a_fresh_install(new_cluster, catalog, file_root):
    c = new_cluster(settings=FAST)
    ns = "up_%s" % uuid.uuid4().hex[:6]
    os.chmod(file_root, 0o755)
    res = synth.generate(synth.build_parser().parse_args(
        ["--out", "file://%s/%s/t1" % (file_root, ns), "--data-files", "2", "--no-data-bytes",
         "--single-metadata", "--codec", "null"]))
    catalog.register(ns, "t1", res["metadata_location"])

    # 0.1.0 in the workers' database, with data as 0.1.0 wrote it
    c.query("CREATE EXTENSION tms VERSION '0.1.0'")
    assert c.one("SELECT extversion FROM pg_extension WHERE extname = 'tms'") == "0.1.0"
    c.query(V010_DATA, {"uri": catalog.uri, "ns": ns})
    next_job = c.one("SELECT max(id) + 1 FROM tms.iceberg_cleanup_job")

    c.query("ALTER EXTENSION tms UPDATE")
    current = c.one("SELECT default_version FROM pg_available_extensions WHERE name = 'tms'")
    assert c.one("SELECT extversion FROM pg_extension WHERE extname = 'tms'") == current

    assert_equals_a_fresh_install(c)

    # the data: requested_by from created_by (a role that is gone: the
    # extension's owner), the phase, the job id sequence, each policy's task
    assert c.query("SELECT table_name, requested_by::text, phase, state, dropped_at IS NOT NULL"
                   " FROM tms.iceberg_cleanup_job ORDER BY id") == [
        ("pending", "app", "content", "PENDING", True),
        ("done", "postgres", "metadata", "SUCCEEDED", True)]
    assert c.one("SELECT nextval('tms.iceberg_cleanup_job_id_seq')") == next_job
    assert c.query("SELECT name, owner::text, group_name, rules FROM tms.policies") == \
        [("up-p", "app", "up-g", 1)]
    policy = c.one("SELECT id FROM tms.maintenance_policies WHERE name = 'up-p'")
    assert c.query("SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'policy-expand'"
                   " AND task_instance = %s", (str(policy),)) == [(1,)]
    assert c.one("SELECT grantees::text FROM tms.object_groups WHERE name = 'up-g'") == "{}"

    # the workers run the updated installation: the policy's task refreshes
    # its group as its owner, and the API acts for the current user
    wait_for(lambda: c.one("SELECT count(*) FROM tms.tables WHERE namespace = %s", (ns,)) == 1,
             timeout=60, what="the policy's task to refresh its group (tasks: %s)"
             % (c.query("SELECT kind, instance, state, last_error FROM tms.tasks"),))
    assert c.one("SELECT consecutive_failures FROM tms.scheduled_tasks"
                 " WHERE task_name = 'policy-expand' AND task_instance = %s",
                 (str(policy),)) == 0
    assert c.one("SET ROLE app; SELECT tms.create_object_group('up-g2', 'up_srv', 'x') > 0")
    assert c.one("SELECT owner::text FROM tms.object_groups WHERE name = 'up-g2'") == "app"
    assert c.query("SET ROLE app; SELECT state FROM tms.purge_status('up_srv', 'ns', 'pending')") == \
        [("PENDING",)]


def update_fragments(version):
    """The hand-written fragments sql/updates/A--version.sql."""
    d = os.path.join(REPO, "sql", "updates")
    return sorted(f for f in os.listdir(d) if f.endswith("--%s.sql" % version))


SEARCH_PATH_FUNCTIONS = """
SELECT p.oid::regprocedure::text, array_to_string(p.proconfig, ', ')
  FROM pg_proc p
 WHERE p.pronamespace = 'tms'::regnamespace
   AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%%')
"""


@pytest.mark.parametrize("start", ["0.5.0", "0.6.0"])
def test_generated_update_equals_a_fresh_install(new_cluster, start):
    """The update script to the current version is generated
    (scripts/sql-gen.sh: the fragment of sql/updates/ and every idempotent
    file of sql/install/functions/); from the last hand-written version and
    from the one before it, ALTER EXTENSION tms UPDATE goes through it and
    ends equal to a fresh installation, every function's SET search_path
    included."""
    c = new_cluster(settings=dict(FAST, **{"tms.enabled": "off"}))
    current = c.one("SELECT default_version FROM pg_available_extensions WHERE name = 'tms'")
    fragments = update_fragments(current)
    assert fragments, "no sql/updates/A--%s.sql" % current
    sharedir = subprocess.run(["pg_config", "--sharedir"], capture_output=True, text=True,
                              check=True).stdout.strip()
    for fragment in fragments:
        with open(os.path.join(sharedir, "extension", "tms--" + fragment)) as f:
            assert f.readline().startswith("-- Generated by scripts/sql-gen.sh"), fragment
    path = c.one("SELECT path FROM pg_extension_update_paths('tms')"
                 " WHERE source = %s AND target = %s", (start, current))
    assert path is not None and "--".join(path.split("--")[-2:]) + ".sql" in fragments, path

    c.query("CREATE EXTENSION tms VERSION %s", (start,))
    c.query("ALTER EXTENSION tms UPDATE")
    assert c.one("SELECT extversion FROM pg_extension WHERE extname = 'tms'") == current

    assert_equals_a_fresh_install(c)
    with_path = dict(c.query(SEARCH_PATH_FUNCTIONS, dbname="fresh"))
    assert len(with_path) >= 49, with_path
    assert dict(c.query(SEARCH_PATH_FUNCTIONS)) == with_path


def test_the_generator_refuses_what_cannot_run_twice(tmp_path):
    """scripts/sql-gen.sh, on a copy of the tree: an update script drops
    what its fragment lists before the fragment, then replays the
    idempotent files; a statement that cannot run twice in an idempotent
    file, or a "-- drop:" line naming a table, fails the build."""
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "scripts"))
    shutil.copy(os.path.join(REPO, "scripts", "sql-gen.sh"), os.path.join(root, "scripts"))
    shutil.copytree(os.path.join(REPO, "sql", "install"), os.path.join(root, "sql", "install"))
    os.makedirs(os.path.join(root, "sql", "updates"))
    fragment = os.path.join(root, "sql", "updates", "1.0.0--1.1.0.sql")

    def gen(*args):
        return subprocess.run(["bash", os.path.join(root, "scripts", "sql-gen.sh")] + list(args),
                              capture_output=True, text=True)

    with open(fragment, "w") as f:
        f.write("-- drop: VIEW tms.workers\n-- drop: FUNCTION tms.workers_internal()\n"
                "ALTER TABLE tms.task_kinds ADD COLUMN note text;\n")
    r = gen("update", fragment)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "ALTER EXTENSION tms UPDATE TO '1.1.0'" in out
    drop = out.index("DROP VIEW tms.workers;\nDROP FUNCTION tms.workers_internal();")
    alter = out.index("ALTER TABLE tms.task_kinds ADD COLUMN note text;")
    replay = out.index("CREATE OR REPLACE VIEW tms.workers AS")
    assert drop < alter < replay
    assert not re.search(r"^CREATE (TABLE|INDEX|TRIGGER|FOREIGN)", out, re.M)

    with open(fragment, "w") as f:
        f.write("-- drop: TABLE tms.tables\n")
    r = gen("update", fragment)
    assert r.returncode == 1 and "drop: TABLE tms.tables" in r.stderr, r.stderr

    with open(os.path.join(root, "sql", "install", "functions", "30_dsl.sql"), "a") as f:
        f.write("INSERT INTO tms.task_kinds VALUES ('x', NULL, 1, true);\n")
    r = gen("install")
    assert r.returncode == 1 and "30_dsl.sql" in r.stderr and "INSERT INTO" in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# pg_upgrade
# ---------------------------------------------------------------------------

def tms_processes(c):
    """tms's processes, from pg_stat_activity and from ps."""
    seen = set(r[0] for r in c.query("SELECT backend_type FROM pg_stat_activity"
                                     " WHERE backend_type LIKE 'tms %'", dbname="postgres"))
    ps = subprocess.run(["ps", "-o", "args=", "--ppid", str(c.postmaster_pid())],
                        capture_output=True, text=True).stdout
    seen |= set(re.findall(r"postgres: .*?(tms (?:launcher|supervisor|worker))", ps))
    return seen


def backend_types(c):
    return set(r[0] for r in c.query("SELECT backend_type FROM pg_stat_activity", dbname="postgres"))


def pg_ctl(c, *args):
    run(_as_server_user([os.path.join(BINDIR, "pg_ctl"), "-D", c.datadir] + list(args)),
        cwd="/tmp")


def test_binary_upgrade_mode_starts_no_tms_process(new_cluster):
    c = new_cluster(settings=FAST)
    c.query("CREATE EXTENSION tms")
    # started normally, tms's processes are there
    wait_for(lambda: tms_processes(c) >= {"tms launcher", "tms supervisor", "tms worker"},
             what="the tms processes of a normal start")
    c.stop()

    # as pg_upgrade starts it: postgres -b
    pg_ctl(c, "-l", c.logfile, "-w", "-t", "60", "-o", "-b", "start")
    try:
        # the bgworkers of the same start phase as the tms launcher
        # (BgWorkerStart_RecoveryFinished) are running: the postmaster has
        # started every registered one
        wait_for(lambda: "logical replication launcher" in backend_types(c),
                 what="the logical replication launcher")
        assert tms_processes(c) == set()
        # nor does it reserve tms's shared memory: tms.workers says so
        e = c.query_error("SELECT count(*) FROM tms.workers")
        assert e.pgcode == "55000", str(e)
    finally:
        c.stop()


def test_pg_upgrade_keeps_tms(new_cluster):
    """A real pg_upgrade between two PostgreSQL 15 clusters with tms (and
    pg_cron) preloaded: it succeeds, and the new cluster has tms's data and
    runs its workers."""
    # the old cluster's pool is off, so that the task below waits for the new one
    old = new_cluster(settings=dict(FAST, **{"tms.enabled": "off"}))
    old.query("""
        CREATE EXTENSION tms;
        CREATE ROLE app;
        CREATE SERVER pgu_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
        GRANT USAGE ON FOREIGN SERVER pgu_srv TO app;
        CREATE TABLE public.ran (instance text, who text);
        CREATE PROCEDURE public.record(i text, d jsonb) LANGUAGE sql
            AS $$ INSERT INTO public.ran VALUES (i, current_user) $$;
        SELECT tms.register_task_kind('record', 'public.record(text,jsonb)', 1);
        SELECT tms.schedule_task('record', 'after-upgrade');
        SELECT tms.observe_table('pgu_srv', 'ns', 't' || g, NULL, NULL, NULL, g, g * 10)
          FROM generate_series(1, 5) g;
        INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                             metadata_location, requested_by, state,
                                             finished_at, files_deleted)
            VALUES ('pgu_srv', 'ns', 'gone', '/nowhere/gone', '/nowhere/gone/v1.metadata.json',
                    'app', 'SUCCEEDED', now(), 42);
    """)
    old.query("SET ROLE app; SELECT tms.create_object_group('pgu-g', 'pgu_srv', 'ns');"
              " SELECT tms.create_policy('pgu-p', 'pgu-g', active => false);")
    before = old.query("SELECT (SELECT max(id) FROM tms.tables), (SELECT max(id) FROM tms.object_groups),"
                       " (SELECT max(id) FROM tms.iceberg_cleanup_job)")[0]
    old.stop()

    # the new cluster and pg_upgrade's working directory (its sockets: a
    # short path), where the server's user may write
    work = tempfile.mkdtemp(prefix="pgu.", dir="/tmp")
    os.chmod(work, 0o755)
    _chown_to_server_user(work)
    new = Cluster(os.path.join(work, "new", "data"), settings=FAST)
    try:
        new.init()
        t0 = time.monotonic()
        run(_as_server_user([os.path.join(BINDIR, "pg_upgrade"), "-b", BINDIR, "-B", BINDIR,
                             "-d", old.datadir, "-D", new.datadir,
                             "-p", str(free_port()), "-P", str(free_port()),
                             "-U", "postgres", "-s", work, "-N"]), cwd=work)
        print("pg_upgrade took %.1f s" % (time.monotonic() - t0))
        new.start()
        assert new.query("SELECT extversion FROM pg_extension WHERE extname = 'tms'") == \
            new.query("SELECT default_version FROM pg_available_extensions WHERE name = 'tms'")
        assert new.query("SELECT name, owner::text, active FROM tms.policies") == \
            [("pgu-p", "app", False)]
        assert new.query("SELECT requested_by::text, files_deleted FROM tms.iceberg_cleanup_job") == \
            [("app", 42)]
        assert new.one("SELECT count(*) FROM tms.tables") == 5
        # the sequences go on
        after = new.query("SELECT tms.observe_table('pgu_srv', 'ns', 'new', NULL, NULL, NULL),"
                          " (SELECT nextval('tms.object_groups_id_seq')),"
                          " (SELECT nextval('tms.iceberg_cleanup_job_id_seq'))")[0]
        assert all(a > b for a, b in zip(after, before)), (before, after)
        # the workers of the new cluster run the task the old one left
        wait_for(lambda: new.query("SELECT * FROM public.ran") == [("after-upgrade", "postgres")],
                 timeout=60, what="the new cluster's workers to run the task")
        assert tms_processes(new) >= {"tms launcher", "tms supervisor", "tms worker"}
    finally:
        new.destroy()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------
# pg_dump and pg_restore
# ---------------------------------------------------------------------------

def give_to_server(path):
    import pwd
    uid = pwd.getpwnam("postgres").pw_uid
    for d, _, files in os.walk(path):
        os.chown(d, uid, -1)
        os.chmod(d, 0o755)
        for f in files:
            os.chown(os.path.join(d, f), uid, -1)


def commit_append(catalog, ns, table):
    """One Iceberg commit: a new snapshot reusing the current manifest list."""
    meta = catalog.load_table(ns, table)["metadata"]
    cur = meta["current-snapshot-id"]
    snap = [s for s in meta["snapshots"] if s["snapshot-id"] == cur][0]
    new_id = int(uuid.uuid4().int % (1 << 62))
    snapshot = {
        "snapshot-id": new_id, "parent-snapshot-id": cur,
        "sequence-number": meta.get("last-sequence-number", 0) + 1,
        "timestamp-ms": max(int(time.time() * 1000), snap["timestamp-ms"] + 1),
        "manifest-list": snap["manifest-list"],
        "summary": {"operation": "append", "added-files-size": "1024", "added-data-files": "1"},
        "schema-id": snap.get("schema-id", 0),
    }
    catalog.request("POST", "namespaces/%s/tables/%s" % (urllib.parse.quote(ns),
                                                       urllib.parse.quote(table)),
                    {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                                       "snapshot-id": cur}],
                     "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                                 {"action": "set-snapshot-ref", "ref-name": "main",
                                  "type": "branch", "snapshot-id": new_id}]})


# one INSERT per table of the extension with a sequence, as the API and the
# workers write them (run in one transaction, rolled back)
SEQUENCE_INSERTS = [
    ("tms.tables", "SELECT tms.observe_table('dumpcat', 'x', 'new', NULL, NULL, NULL)"),
    ("tms.object_groups",
     "SET ROLE app; SELECT tms.create_object_group('dump-g2', 'dumpcat', 'x'); RESET ROLE"),
    ("tms.maintenance_policies",
     "SET ROLE app; SELECT tms.create_policy('dump-p2', 'dump-g2', active => false); RESET ROLE"),
    ("tms.maintenance_rules",
     "SET ROLE app; SELECT tms.add_rule('dump-p2', 'snapshot-expiry', 'local',"
     " '{\"commits-added\": 1}'); RESET ROLE"),
    ("tms.table_maintenance_job",
     "INSERT INTO tms.table_maintenance_job (table_id, operation, engine)"
     " SELECT max(id), 'snapshot-expiry', 'local' FROM tms.tables"),
    ("tms.evaluation_log",
     "INSERT INTO tms.evaluation_log (thresholds, condition, counters, outcome, decision)"
     " VALUES ('{}', 'true', '{}', 'ok', 'not-needed')"),
    ("tms.table_snapshot_metrics",
     "INSERT INTO tms.table_snapshot_metrics (job_id, server, namespace, table_name, phase,"
     " metrics) SELECT coalesce(max(job_id), 0) + 1, 'dumpcat', 'x', 'y', 'before',"
     " '{\"snapshots\": 1}' FROM tms.table_snapshot_metrics"),
    ("tms.iceberg_cleanup_job",
     "INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,"
     " metadata_location, requested_by)"
     " VALUES ('dumpcat', 'x', 'y', '/nowhere/y', '/nowhere/y/m.json', 'app')"),
    ("tms.webhook_outbox",
     "INSERT INTO tms.webhook_outbox (server, event, payload) VALUES ('h', 'job-failed', '{}')"),
    ("tms.task_history",
     "INSERT INTO tms.task_history (kind, instance, attempt, started_at, finished_at,"
     " succeeded) VALUES ('record', 'x', 1, now(), now(), true)"),
]


def test_dump_and_restore_into_another_cluster(new_cluster, catalog, s3, file_root, tmp_path):
    tag = uuid.uuid4().hex[:6]
    ns, ns_purge = "dump_%s" % tag, "dump_%s_p" % tag
    os.chmod(file_root, 0o755)
    root = os.path.join(file_root, "dump_%s" % tag)
    for name in ("t1", "t2"):
        res = synth.generate(synth.build_parser().parse_args(
            ["--out", "file://%s/%s" % (root, name), "--data-files", "3", "--snapshots", "2",
             "--no-data-bytes", "--codec", "null"]))
        catalog.register(ns, name, res["metadata_location"])
    give_to_server(root)
    prefix = "dump/%s" % tag
    res = synth.generate(synth.build_parser().parse_args(
        ["--out", "s3://warehouse/" + prefix, "--data-files", "5", "--snapshots", "2",
         "--s3-endpoint", s3.endpoint, "--list-files"]))
    catalog.register(ns_purge, "s3t", res["metadata_location"])
    client = s3.client()
    assert len(client.list("warehouse", prefix)) >= 5

    # the source: its pool is off, so every task and the purge wait in the dump
    src = new_cluster(settings=dict(FAST, **{"tms.enabled": "off"}))
    src.query("""
        CREATE EXTENSION tms;
        CREATE ROLE app;
        CREATE SERVER dumpcat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %s,
            relative_path_root %s, allowed_locations %s, s3_vended_endpoint 'true',
            retries '0', request_timeout '10s');
        GRANT USAGE ON FOREIGN SERVER dumpcat TO app;
        CREATE USER MAPPING FOR app SERVER dumpcat;
        CREATE TABLE public.ran (instance text, who text);
        CREATE PROCEDURE public.record(i text, d jsonb) LANGUAGE sql
            AS $$ INSERT INTO public.ran VALUES (i, current_user) $$;
        SELECT tms.register_task_kind('record', 'public.record(text,jsonb)', 1);
        SELECT tms.schedule_task('record', 'after-restore');
    """, (catalog.uri, file_root, "file://%s/, s3://warehouse/" % root))
    src.query("""
        SET ROLE app;
        SELECT tms.create_object_group('dump-g', 'dumpcat', %s);
        SELECT tms.create_policy('dump-p', 'dump-g');
        SELECT tms.add_rule('dump-p', 'snapshot-expiry', 'local', '{"commits-added": 1}', 'true',
                            min_interval => '0');
        SELECT tms.add_rule('dump-p', 'compaction', 'spark', '{"commits-added": 1}',
                            'dataFiles > 1000', min_interval => '0');
    """, (ns,))
    rows = src.query("SET ROLE app; SELECT table_name, operation, decision"
                     " FROM tms.evaluate_now('dump-p')")
    assert sorted(rows) == [("t1", "compaction", "not-needed"), ("t1", "snapshot-expiry", "submitted"),
                            ("t2", "compaction", "not-needed"), ("t2", "snapshot-expiry", "submitted")]
    job = src.one("SET ROLE app; SELECT tms.purge_table('dumpcat', %s, 's3t')", (ns_purge,))
    assert src.one("SELECT count(*) FROM tms.iceberg_cleanup_credentials WHERE job_id = %s",
                   (job,)) == 1
    assert src.one("SELECT storage->>'credentials' FROM tms.iceberg_cleanup_job WHERE id = %s",
                   (job,)) == "vended by the catalog"
    counts = dict(src.query("""
        SELECT 'tables', count(*) FROM tms.tables UNION ALL
        SELECT 'log', count(*) FROM tms.evaluation_log UNION ALL
        SELECT 'jobs', count(*) FROM tms.table_maintenance_job UNION ALL
        SELECT 'baselines', count(*) FROM tms.rule_baselines UNION ALL
        SELECT 'tasks', count(*) FROM tms.scheduled_tasks"""))
    # tasks: the policy's, two maintenance jobs', the purge's, the SQL kind's
    assert counts == {"tables": 2, "log": 4, "jobs": 2, "baselines": 4, "tasks": 5}, counts
    last_log = src.one("SELECT max(id) FROM tms.evaluation_log")
    # a rule changed in place: its versions go with the dump
    src.query("SET ROLE app; SELECT tms.alter_rule(r.id, condition => 'dataFiles > 2000')"
              " FROM tms.rules r WHERE r.operation = 'compaction'")
    versions = src.query("SELECT rule_id, version, changed_by, changes, definition"
                         " FROM tms.rule_versions ORDER BY 1, 2")
    assert [(v[1], v[2]) for v in versions] == [(1, "app"), (1, "app"), (2, "app")], versions
    # budgets go with the dump
    src.query("SET ROLE app; SELECT tms.set_budget('dump-p', jobs_per_window => 3);"
              " SELECT tms.set_budget('dump-p', r.id, bytes_rewritten_per_hour => 1000)"
              " FROM tms.rules r WHERE r.operation = 'compaction'")
    budgets = src.query("SELECT policy, rule_id, bytes_rewritten_per_hour, jobs_per_window, set_by"
                        " FROM tms.budgets ORDER BY rule_id NULLS FIRST")
    assert len(budgets) == 2, budgets

    dump = os.path.join(str(tmp_path), "tms.dump")
    t0 = time.monotonic()
    run(["pg_dump", "-Fc", "-f", dump, "-d", src.dsn()])

    # the target: roles are global objects, made first (pg_dumpall -g)
    dst = new_cluster(settings=dict(FAST, **{"tms.purge_max_attempts": "10"}))
    dst.query("CREATE ROLE app")
    run(["pg_restore", "--single-transaction", "-d", dst.dsn(), dump])
    print("dump and restore took %.1f s" % (time.monotonic() - t0))
    src.stop()

    assert dst.query("SELECT name, owner::text FROM tms.policies") == [("dump-p", "app")]
    assert dst.one("SELECT count(*) FROM tms.evaluation_log") == 4
    assert dst.query("SELECT rule_id, version, changed_by, changes, definition"
                     " FROM tms.rule_versions ORDER BY 1, 2") == versions
    assert dst.query("SELECT version, condition FROM tms.rules WHERE operation = 'compaction'") \
        == [(2, "dataFiles > 2000")]
    assert dst.query("SELECT policy, rule_id, bytes_rewritten_per_hour, jobs_per_window, set_by"
                     " FROM tms.budgets ORDER BY rule_id NULLS FIRST") == budgets

    # every table with a sequence takes a new row
    with_sequences = set(r[0] for r in dst.query("""
        SELECT DISTINCT d.refobjid::regclass::text
          FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
         WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
           AND d.deptype IN ('a', 'i') AND s.relnamespace = 'tms'::regnamespace"""))
    assert with_sequences == set(t for t, _ in SEQUENCE_INSERTS)
    conn = dst.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for table, sql in SEQUENCE_INSERTS:
                cur.execute("SAVEPOINT s")
                try:
                    cur.execute(sql)
                except psycopg2.Error as e:
                    raise AssertionError("insert into %s after restore: %s" % (table, e))
                cur.execute("RELEASE SAVEPOINT s")
    finally:
        conn.rollback()
        conn.close()

    # the tasks of the dump run in the target's pool: the SQL kind's ...
    wait_for(lambda: dst.query("SELECT * FROM public.ran") == [("after-restore", "postgres")],
             timeout=60, what="the SQL kind's task to run after the restore")
    # ... the maintenance jobs' (snapshot expiry, run by tms itself) ...
    wait_for(lambda: dst.query("SELECT state, count(*) FROM tms.maintenance_jobs GROUP BY 1")
             == [("succeeded", 2)], timeout=60,
             what="the maintenance jobs to run (%s)" % (
                 dst.query("SELECT state, reason, last_error FROM tms.maintenance_jobs"),))
    # ... the policy's: a commit after the dump is found and evaluated by
    # both rules (their jobs ended, so their baselines were reset)
    commit_append(catalog, ns, "t1")
    wait_for(lambda: sorted(dst.query("SELECT table_name, operation, decision FROM tms.evaluation_log"
                                      " WHERE id > %s", (last_log,))) ==
             [("t1", "compaction", "not-needed"), ("t1", "snapshot-expiry", "submitted")],
             timeout=60, what="the restored policy to evaluate the new commit (tasks: %s)"
             % (dst.query("SELECT kind, instance, state, last_error FROM tms.tasks"),))
    # ... and the purge's, with the credentials the catalog vended at the
    # source: the catalog drop, then every file
    wait_for(lambda: dst.one("SELECT state FROM tms.purge_jobs WHERE id = %s", (job,))
             in ("SUCCEEDED", "FAILED"), timeout=60, what="the purge job to end")
    # (s3rver 3.7.1 deletes the keys of one multi-object delete concurrently
    # and may answer 500 when two of them clean up the same directory: an
    # attempt can fail, and the next one goes on)
    assert dst.query("SELECT state, last_error, requested_by::text FROM tms.purge_jobs"
                     " WHERE id = %s", (job,)) == [("SUCCEEDED", None, "app")]
    assert client.list("warehouse", prefix) == []
    st, _, _ = catalog.raw("GET", "/v1/%s/namespaces/%s/tables/s3t" % (catalog.prefix, ns_purge))
    assert st == 404
    assert dst.one("SELECT count(*) FROM tms.iceberg_cleanup_credentials") == 0


def test_dump_and_restore_keep_an_attached_jdbc_catalog(new_cluster, tmp_path):
    """A table of pointers with tms's trigger (tms.attach_jdbc_catalog):
    the trigger is the table's and is dumped with it, tms.commit_sources
    with the extension's configuration; in the restored database a pointer
    swap is a commit event again."""
    src = new_cluster(settings=dict(FAST, **{"tms.enabled": "off"}))
    src.psql("""
        CREATE EXTENSION tms;
        CREATE SERVER jsrv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
        CREATE TABLE iceberg_tables (
            catalog_name varchar(255) NOT NULL, table_namespace varchar(255) NOT NULL,
            table_name varchar(255) NOT NULL, metadata_location varchar(1000),
            previous_metadata_location varchar(1000), iceberg_type varchar(5),
            PRIMARY KEY (catalog_name, table_namespace, table_name));
        SELECT tms.attach_jdbc_catalog('iceberg_tables', 'jsrv', 'prod');
        SELECT tms.create_object_group('jg', 'jsrv', 'ns');
        SELECT tms.create_policy('jp', 'jg', active => false);
        SELECT tms.add_rule('jp', 'compaction', 'spark', schedule => '{"on-commit": true}');
        INSERT INTO iceberg_tables VALUES ('prod', 'ns', 't', 'm1', NULL, 'TABLE');""")
    assert src.one("SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'commit-job'") == 1
    dump = os.path.join(str(tmp_path), "jdbc.dump")
    run(["pg_dump", "-Fc", "-f", dump, "-d", src.dsn()])
    src.stop()
    dst = new_cluster(settings=dict(FAST, **{"tms.enabled": "off"}))
    run(["pg_restore", "--single-transaction", "-d", dst.dsn(), dump])
    assert dst.query("SELECT server::text, kind, pointers::text, catalog_name"
                     " FROM tms.commit_sources") == [("jsrv", "jdbc", "iceberg_tables", "prod")]
    assert dst.query("SELECT tgname::text FROM pg_trigger"
                     " WHERE tgrelid = 'iceberg_tables'::regclass") == [("tms_commit_events",)]
    dst.query("UPDATE iceberg_tables SET metadata_location = 'm2'")
    assert dst.one("SELECT task_data ->> 'events' FROM tms.scheduled_tasks"
                   " WHERE task_name = 'commit-job'") == "2"
    # and the trigger goes with the last source
    assert dst.one("SELECT tms.detach_commit_source('jsrv')") is True
    assert dst.one("SELECT count(*) FROM pg_trigger"
                   " WHERE tgrelid = 'iceberg_tables'::regclass") == 0
