"""
test_world_faults.py -- fault injection and the request log of the test
catalog: injected statuses, hangs (seen by a client timeout), malformed
bodies, closed connections, counts by path and status; the lost-answer
fault and Idempotency-Key (advertised, replayed, off by default).
"""

import http.client
import json
import os
import socket
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


@pytest.fixture
def cat(make_catalog):
    c = make_catalog()
    c.create_namespace("f")
    c.request("POST", "namespaces/f/tables", {"name": "orders", "schema": SCHEMA})
    c.reset_requests()
    return c


def table_path(c):
    return "/v1/%s/namespaces/f/tables/orders" % c.prefix


def test_status_fault_fires_count_times(cat):
    cat.fault(r"/v1/.*/tables/orders$", action="status", status=503, count=2, method="GET")
    p = table_path(cat)
    st1, b1, _ = cat.raw("GET", p)
    st2, _, _ = cat.raw("GET", p)
    st3, b3, _ = cat.raw("GET", p)
    assert (st1, st2, st3) == (503, 503, 200)
    assert b1["error"]["code"] == 503 and "metadata" in b3
    # other methods and paths were not affected
    assert cat.raw("HEAD", p)[0] == 204
    counts = cat.requests()["counts"]
    assert counts["GET %s" % p] == {"503": 2, "200": 1}


def test_status_fault_with_body_and_headers(cat):
    cat.fault(r"/tables/orders$", status=429, body='{"error": {"message": "slow down", '
              '"type": "TooManyRequests", "code": 429}}', headers={"Retry-After": "1"})
    st, body, hdrs = cat.raw("GET", table_path(cat))
    assert st == 429 and body["error"]["message"] == "slow down" and hdrs["Retry-After"] == "1"


def test_hang_fault_hits_client_timeout(cat):
    cat.fault(r"/tables/orders$", action="hang", seconds=3)
    t0 = time.time()
    with pytest.raises((socket.timeout, TimeoutError, OSError)):
        cat.raw("GET", table_path(cat), timeout=1)
    assert time.time() - t0 < 2.5
    # after the hang the server still answers (and the hung request completes)
    assert cat.raw("GET", table_path(cat))[0] == 200


def test_malformed_fault(cat):
    cat.fault(r"/tables/orders$", action="malformed")
    st, body, hdrs = cat.raw("GET", table_path(cat))
    assert st == 200 and hdrs["Content-Type"] == "application/json"
    assert isinstance(body, str)
    with pytest.raises(ValueError):
        json.loads(body)


def test_close_fault(cat):
    cat.fault(r"/tables/orders$", action="close")
    conn = http.client.HTTPConnection("127.0.0.1", cat.port, timeout=5)
    conn.request("GET", table_path(cat))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.getresponse()
    conn.close()
    assert cat.raw("GET", table_path(cat))[0] == 200


def test_clear_faults_and_reset_counters(cat):
    cat.fault(r"/tables/orders$", count=5)
    cat.clear_faults()
    assert cat.raw("GET", table_path(cat))[0] == 200
    assert cat.requests()["total"] == 1
    cat.reset_requests()
    assert cat.requests()["total"] == 0


def test_request_counts_show_304(cat):
    p = table_path(cat)
    _, _, hdrs = cat.raw("GET", p)
    for _ in range(3):
        assert cat.raw("GET", p, headers={"If-None-Match": hdrs["ETag"]})[0] == 304
    log = cat.requests(path_regex="orders$")
    assert log["counts"]["GET %s" % p] == {"200": 1, "304": 3}
    assert [e["if_none_match"] for e in log["requests"]][1:] == [hdrs["ETag"]] * 3


def test_idempotency_key_replay_and_lost_fault(cat):
    ns_path = "/v1/%s/namespaces" % cat.prefix
    key = {"Idempotency-Key": "0190b8a0-0000-7000-8000-000000000001"}
    # off by default: not advertised, a repeated key is applied again
    assert "idempotency-key-lifetime" not in cat.request("GET", "/v1/config")
    assert cat.raw("POST", ns_path, {"namespace": ["i0"]}, headers=key)[0] == 200
    assert cat.raw("POST", ns_path, {"namespace": ["i0"]}, headers=key)[0] == 409
    assert cat.idempotency() == {"lifetime": None, "keys": 0}
    cat.set_idempotency("PT10M")
    assert cat.request("GET", "/v1/config")["idempotency-key-lifetime"] == "PT10M"
    # the first answer is applied and lost; the repeat gets it, not a 409
    cat.fault(r"/namespaces$", action="lost", status=503, method="POST")
    key = {"Idempotency-Key": "0190b8a0-0000-7000-8000-000000000002"}
    st1, _, _ = cat.raw("POST", ns_path, {"namespace": ["i1"]}, headers=key)
    st2, b2, _ = cat.raw("POST", ns_path, {"namespace": ["i1"]}, headers=key)
    assert (st1, st2) == (503, 200) and b2["namespace"] == ["i1"]
    # another key is another request
    st3, _, _ = cat.raw("POST", ns_path, {"namespace": ["i1"]},
                        headers={"Idempotency-Key": "0190b8a0-0000-7000-8000-000000000003"})
    assert st3 == 409
    log = cat.requests(path_regex="namespaces$")["requests"]
    assert [(e["status"], e["fault"]) for e in log[-3:]] == [
        (503, "lost"), (200, "idempotent-replay"), (409, None)]
    assert log[-2]["idempotency_key"] == key["Idempotency-Key"]
    assert cat.idempotency() == {"lifetime": "PT10M", "keys": 2}
    assert cat.raw("POST", "/admin/idempotency", {"lifetime": "30 minutes"},
                   auth=False)[0] == 400
    cat.clear_idempotency()
    assert "idempotency-key-lifetime" not in cat.request("GET", "/v1/config")


def test_admin_token(make_catalog):
    c = make_catalog(admin_token="adm")
    st, _, _ = c.raw("GET", "/admin/requests", auth=False)
    assert st == 403
    assert c.requests()["total"] >= 0
