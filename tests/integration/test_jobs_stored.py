"""What a key's jobs keep is bounded: at most VTS_JOBS_MAX_STORED_ITEMS items, ended jobs included until they expire,
checked in the step that makes the job, on both backends (SQLite and a real redis-server); past it a 429
too_many_stored_items naming the bound. Expired jobs free their room."""
import time

import pytest

from conftest import Gateway
from test_jobs_api import IDS, call, err, post
from vtsproc import wait_for, write_keyfile

KEY = "vts_test_key_stored"
MSG = ("This API key's jobs would keep more than 5 items (VTS_JOBS_MAX_STORED_ITEMS), ended jobs included until "
       "they expire.")


@pytest.fixture(params=["sqlite", "redis"])
def start(request, tmp_path):
    made = []

    def make(env):
        env = dict(env, VTS_JOBS_MAX_STORED_ITEMS="5", VTS_JOBS_MAX_OPEN="100")
        if request.param == "redis":
            env["VTS_REDIS_URL"] = request.getfixturevalue("redis").url
        gw = Gateway(tmp_path / ("gw%d" % len(made)), env=env)
        (tmp_path / ("gw%d" % len(made))).mkdir(exist_ok=True)
        write_keyfile(gw.keys_file, [("stored", KEY, "active", 100000, 60, 100000),
                                     ("other", KEY + "_other", "active", 100000, 60, 100000)])
        made.append(gw)
        return gw.start()
    make.backend = request.param
    try:
        yield make
    finally:
        for gw in made:
            gw.stop()


def test_stored_items_stop_at_the_cap_ended_jobs_included(start):
    gw = start({})
    a = post(gw, {"video_ids": IDS[:3]}, key=KEY)
    b = post(gw, {"video_ids": IDS[3:5]}, key=KEY)
    assert (a[0], b[0]) == (202, 202)
    # Ended (cancelled) jobs still hold their items until they expire.
    for loc in (a[1]["location"], b[1]["location"]):
        assert call(gw, "DELETE", loc, key=KEY)[0] == 200
    status, h, body = post(gw, {"video_ids": IDS[5:6]}, key=KEY)
    assert (status, body) == (429, err("too_many_stored_items", MSG))
    assert "retry-after" not in h
    assert post(gw, {"video_ids": IDS[:5]}, key=KEY + "_other")[0] == 202, "the cap is per key"
    assert post(gw, {"video_ids": IDS[:6]}, key=KEY + "_other")[::2] == (429, err("too_many_stored_items", MSG))


def test_expired_jobs_give_their_room_back(start):
    gw = start({"VTS_JOB_TTL_S": "1"})
    loc = post(gw, {"video_ids": IDS[:5]}, key=KEY)[1]["location"]
    assert call(gw, "DELETE", loc, key=KEY)[0] == 200
    assert post(gw, {"video_ids": IDS[5:6]}, key=KEY)[0] == 429
    t_end = time.time() + 1.2
    assert wait_for(lambda: time.time() > t_end, 5)  # until the TTL has passed
    if start.backend == "sqlite":
        # The dispatcher deletes what expired at its start and every minute after: restart to see it now.
        gw.stop()
        gw.start()
    assert wait_for(lambda: post(gw, {"video_ids": IDS[5:10]}, key=KEY)[0] == 202, 10)
