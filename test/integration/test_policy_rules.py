"""
test_policy_rules.py -- rules people can change, over the test world's
REST catalog (a namespace of six synthetic tables):

  - an altered catch-up rule keeps its baselines: after its jobs ran, a
    change of its condition fires nothing until a table gets new commits,
    and the evaluation and the job record the new version; dropping and
    adding the same rule again (the only way before tms.alter_rule) fires
    at once across the whole group;
  - precedence: a group naming one table exactly and a namespace-wide
    group both have a compaction rule; a commit to that table gives a job
    of the exact group's rule only (the wide group's evaluation does not
    even look at it), the other tables get the wide group's, and
    tms.effective_rules says so.

Run: /usr/bin/python3 -m pytest -q test/integration/test_policy_rules.py
"""

import os
import sys
import time
import urllib.parse
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import fetch as q  # noqa: E402

NTABLES = 6


def make_server(conn, catalog, file_root):
    name = "rules_%s" % uuid.uuid4().hex[:8]
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    q(conn, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s, "
            "relative_path_root %%s, allowed_locations %%s, retries '0',"
            " request_timeout '10s')" % name,
      ("http://127.0.0.1:%d" % catalog.port, file_root, "file://%s/" % file_root))
    q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % name)
    return name


def commit_append(catalog, ns, table):
    """One Iceberg commit to a table: a new snapshot reusing the current
    manifest list."""
    meta = catalog.load_table(ns, table)["metadata"]
    cur = meta["current-snapshot-id"]
    snap = [s for s in meta["snapshots"] if s["snapshot-id"] == cur][0]
    new_id = int(uuid.uuid4().int % (1 << 62))
    snapshot = {
        "snapshot-id": new_id, "parent-snapshot-id": cur,
        "sequence-number": meta.get("last-sequence-number", 0) + 1,
        "timestamp-ms": max(int(time.time() * 1000), snap["timestamp-ms"] + 1),
        "manifest-list": snap["manifest-list"],
        "summary": {"operation": "append", "added-files-size": "1024",
                    "added-data-files": "1"},
        "schema-id": snap.get("schema-id", 0),
    }
    body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": cur}],
            "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": new_id}]}
    catalog.request("POST", "namespaces/%s/tables/%s" % (urllib.parse.quote(ns),
                                                       urllib.parse.quote(table)), body)


@pytest.fixture(scope="module")
def world(catalog, file_root):
    tag = uuid.uuid4().hex[:6]
    ns = "rules_%s" % tag
    os.chmod(file_root, 0o755)          # the server reads manifests as its own user
    catalog.create_namespace(ns)
    names = []
    for i in range(NTABLES):
        name = "t%d" % i
        loc = "file://%s/rules_%s/%s" % (file_root, tag, name)
        opts = synth.build_parser().parse_args(
            ["--out", loc, "--data-files", "3", "--snapshots", "2", "--no-data-bytes",
             "--single-metadata", "--codec", "null", "--seed", str(i)])
        res = synth.generate(opts)
        catalog.request("POST", "namespaces/%s/register" % ns,
                        {"name": name, "metadata-location": res["metadata_location"]})
        names.append(name)
    return {"ns": ns, "tables": names}


def evaluate(conn, policy):
    return q(conn, "SELECT table_name, decision, job_id FROM tms.evaluate_now(%s, true)"
                   " ORDER BY table_name", (policy,))


def finish_jobs(conn, server):
    q(conn, "SELECT tms.finish_operation(j.id) FROM tms.table_maintenance_job j"
            " JOIN tms.tables t ON t.id = j.table_id"
            " WHERE t.server = %s AND j.finished_at IS NULL", (server,))


def test_altered_catch_up_rule_keeps_its_baseline(pg, catalog, file_root, world):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    ns, tables = world["ns"], world["tables"]
    name = "keep-%s" % uuid.uuid4().hex[:6]
    q(conn, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s)",
      (name, server, ns))
    # inactive: its task leaves it alone; tms.evaluate_now(force) runs it
    q(conn, "SELECT tms.create_policy(%s, %s, active => false)", (name, name))
    rule = q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}',"
                   " 'true', 'catch-up', min_interval => '0')", (name,))[0][0]

    # a new catch-up rule counts each table's past: it fires on every table
    first = evaluate(conn, name)
    assert [r[0] for r in first] == tables
    assert all(r[1] == "submitted" for r in first)
    finish_jobs(conn, server)
    assert evaluate(conn, name) == []

    # changed in place: the baselines stay, nothing fires
    assert q(conn, "SELECT tms.alter_rule(%s, condition => 'dataFiles > 0')", (rule,))[0][0] == 2
    assert evaluate(conn, name) == []
    assert q(conn, "SELECT count(*) FROM tms.candidates WHERE server = %s", (server,))[0][0] == 0

    # a new commit fires the new version on that table only
    commit_append(catalog, ns, tables[2])
    rows = evaluate(conn, name)
    assert [(r[0], r[1]) for r in rows] == [(tables[2], "submitted")]
    assert q(conn, "SELECT rule_version, condition FROM tms.evaluation_log"
                   " WHERE rule_id = %s ORDER BY id DESC LIMIT 1", (rule,))[0] == (2, "dataFiles > 0")
    assert q(conn, "SELECT rule_version FROM tms.maintenance_jobs WHERE id = %s",
             (rows[0][2],))[0][0] == 2
    finish_jobs(conn, server)
    me = q(conn, "SELECT current_user")[0][0]
    assert q(conn, "SELECT version, changed_by, changes -> 'condition' ->> 'to'"
                   " FROM tms.rule_versions WHERE rule_id = %s ORDER BY version", (rule,)) == [
        (1, me, None), (2, me, "dataFiles > 0")]

    # what a change meant before alter_rule: drop and add again, and the
    # new rule fires at once across its whole group
    q(conn, "SELECT tms.drop_rule(%s)", (rule,))
    q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}',"
            " 'dataFiles > 0', 'catch-up', min_interval => '0')", (name,))
    assert [r[0] for r in evaluate(conn, name)] == tables
    finish_jobs(conn, server)
    q(conn, "SELECT tms.drop_policy(%s)", (name,))


def test_only_the_nearest_groups_rule_runs(pg, catalog, file_root, world):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    ns, tables = world["ns"], world["tables"]
    tag = uuid.uuid4().hex[:6]
    wide, exact = "wide-%s" % tag, "exact-%s" % tag
    q(conn, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s)",
      (wide, server, ns))
    q(conn, "SELECT tms.create_object_group(%s, server => %s)", (exact, server))
    q(conn, "SELECT tms.add_group_member(%s, %s, %s)", (exact, ns, tables[0]))
    rules = {}
    for g in (wide, exact):
        q(conn, "SELECT tms.create_policy(%s, %s, active => false)", (g, g))
        rules[g] = q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark',"
                           " '{\"commits-added\": 1}', 'true', 'going-forward',"
                           " min_interval => '0')", (g,))[0][0]
    # discovery: going-forward fires nothing
    assert evaluate(conn, wide) == [] and evaluate(conn, exact) == []

    commit_append(catalog, ns, tables[0])
    commit_append(catalog, ns, tables[1])
    # the wide group's evaluation sees both commits (its refresh) but
    # leaves tables[0] to the exact group
    assert [(r[0], r[1]) for r in evaluate(conn, wide)] == [(tables[1], "submitted")]
    assert [(r[0], r[1]) for r in evaluate(conn, exact)] == [(tables[0], "submitted")]
    # the wide rule's counters did fire on tables[0]: only precedence held it
    assert q(conn, "SELECT b.triggered, b.pending_job FROM tms.rule_baselines b"
                   " JOIN tms.tables t ON t.id = b.table_id"
                   " WHERE b.rule_id = %s AND t.server = %s AND t.table_name = %s",
             (rules[wide], server, tables[0])) == [(True, None)]
    jobs = q(conn, "SELECT table_name, rule_id, policy FROM tms.maintenance_jobs"
                   " WHERE server = %s ORDER BY table_name", (server,))
    assert jobs == [(tables[0], rules[exact], exact), (tables[1], rules[wide], wide)]
    # the wide rule never evaluated tables[0]
    assert q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE rule_id = %s"
                   " AND table_name = %s", (rules[wide], tables[0]))[0][0] == 0

    eff = q(conn, "SELECT table_name, rule_id, specificity, overridden_rules, reason"
                  " FROM tms.effective_rules WHERE server = %s AND operation = 'compaction'"
                  " ORDER BY table_name", (server,))
    assert len(eff) == NTABLES
    assert eff[0][:4] == (tables[0], rules[exact], "exact table", [rules[wide]])
    assert eff[0][4] == ('group "%s" names the table more closely (exact table) than'
                         ' group "%s" (pattern)' % (exact, wide))
    assert all(e[1] == rules[wide] and e[3] == [] for e in eff[1:])
    finish_jobs(conn, server)

    # the exact group's rule gone, the wide group's rule takes the table back
    q(conn, "SELECT tms.drop_policy(%s)", (exact,))
    commit_append(catalog, ns, tables[0])
    assert [(r[0], r[1]) for r in evaluate(conn, wide)] == [(tables[0], "submitted")]
    finish_jobs(conn, server)
    q(conn, "SELECT tms.drop_policy(%s)", (wide,))
