"""Redis with credentials, against a real redis-server that wants them: an ACL user with a password (the default
user switched off) and a database other than 0, a wrong password, and rediss:// refused at start. The password
appears in no log line and no message."""
import os
import subprocess
import time
import urllib.parse

import pytest

from conftest import BUILD_DIR, free_port
from stack import Stack
from vtsproc import wait_for

PASSWORD = "s3cret:p@ss/word"
ACL_ARGS = ["--user", "default", "off", "--user", "vts", "on", ">" + PASSWORD, "~*", "&*", "+@all"]


@pytest.fixture
def acl_redis(request):
    request.getfixturevalue("redis")  # skips, loudly, without redis-server
    from redisserver import Redis
    r = Redis(args=ACL_ARGS, auth=("vts", PASSWORD))
    r.start()
    yield r
    r.stop()


def url_for(redis, user, password, db):
    return "redis://%s:%s@127.0.0.1:%d/%d" % (user, urllib.parse.quote(password, safe=""), redis.port, db)


def count_in_db(redis, db, pattern):
    """How many keys match pattern in database db (the script selects it for itself)."""
    line = redis.command("EVAL", "redis.call('SELECT', ARGV[1]) return #redis.call('KEYS', ARGV[2])", "0", str(db),
                         pattern)
    assert line.startswith(b":"), line
    return int(line[1:])


def test_acl_user_with_a_password_and_a_database_carries_limits_and_cache(tmp_path, acl_redis):
    env = {"VTS_REDIS_URL": url_for(acl_redis, "vts", PASSWORD, 3), "VTS_RATE_LIMIT_FAIL_CLOSED": "true"}
    started = time.time()
    stack = Stack(tmp_path, gateway_env=env, fetchers=1)
    try:
        # Fail-closed: a 200 means the limiter's Redis answered, so the connection authenticated.
        r = stack.get("capJson3xx1")
        assert r.status == 200, r
        # The warm-up and this one, in the key's window of 60 s; the window may have turned between the two.
        one_window = int(started) // 60 == int(time.time()) // 60
        assert r.headers["x-ratelimit-remaining"] in ((str(1000000 - 2),) if one_window else
                                                      (str(1000000 - 2), str(1000000 - 1))), r
        assert count_in_db(acl_redis, 3, "vts:rl:*") >= 2
        assert count_in_db(acl_redis, 3, "vts:transcript:{capJson3xx1}:*") == 2  # the transcript and its alias
        assert count_in_db(acl_redis, 0, "vts:*") == 0
        # No connection was refused for its credentials (a slow start may still log "not ready in time").
        refused = [rec for rec in stack.gateway.log_records() if rec.get("msg") == "redis unavailable" and
                   rec.get("error", "").startswith(("WRONGPASS", "NOAUTH", "NOPERM", "ERR"))]
        assert refused == []
        log = stack.gateway.log_text()
        assert PASSWORD not in log and urllib.parse.quote(PASSWORD, safe="") not in log
    finally:
        stack.close()


def test_a_wrong_password_is_a_store_fault_logged_without_the_password(tmp_path, acl_redis, make_gateway):
    wrong = "not-" + PASSWORD
    gw = make_gateway(env={"VTS_REDIS_URL": url_for(acl_redis, "vts", wrong, 0), "VTS_RATE_LIMIT_FAIL_CLOSED": "true"})
    r = gw.request("GET", "/v1/video/transcript?video_id=capJson3xx1", headers={"x-api-key": gw.key})
    assert r.status == 503
    assert r.json()["error"]["code"] == "rate_limit_unavailable"
    def refused():
        return [rec for rec in gw.log_records()
                if rec.get("msg") == "redis unavailable" and rec.get("user") == "limiter" and
                rec["error"].startswith("WRONGPASS")]
    # Each worker says why, once a connection got as far as the login (a slow start may say "not ready" first).
    assert wait_for(lambda: len(refused()) >= 1, 5), gw.log_text()[-2000:]
    log = gw.log_text()
    assert wrong not in log and urllib.parse.quote(wrong, safe="") not in log


def test_rediss_url_stops_the_gateway_pointing_to_a_tls_sidecar(tmp_path):
    env = dict(os.environ, VTS_LISTEN="127.0.0.1:%d" % free_port(), VTS_JOBS_URL="tcp://127.0.0.1:%d" % free_port(),
               VTS_METRICS_LISTEN="", VTS_WORKERS="1", VTS_KEYS_FILE=str(tmp_path / "keys.db"),
               VTS_STATE_DIR=str(tmp_path / "state"), VTS_REDIS_URL="rediss://vts:%s@127.0.0.1:6380" % PASSWORD)
    r = subprocess.run([str(BUILD_DIR / "bin" / "vts-gateway")], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "VTS_REDIS_URL: rediss:// (TLS) is not supported" in r.stderr, r.stderr
    assert "stunnel" in r.stderr
    assert PASSWORD not in r.stderr + r.stdout
