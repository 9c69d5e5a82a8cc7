"""A SQLite job store full of old jobs: ended jobs whose last change is past the default TTL (VTS_JOB_TTL_S, 7 days),
written into a gateway's jobs.db directly, as a store that has served for a while holds them."""
import sqlite3
import time

PER_JOB = 5000
DAY_MS = 86400 * 1000


def fill(db_path, items, key_id="expiry"):
    """Ended jobs of up to PER_JOB failed items each (items in all), last changed 8 days ago."""
    old = int(time.time() * 1000) - 8 * DAY_MS
    con = sqlite3.connect(str(db_path), timeout=30)
    with con:
        for j in range((items + PER_JOB - 1) // PER_JOB):
            n = min(PER_JOB, items - j * PER_JOB)
            job = "j%012xold%06d" % (old, j)
            con.execute("INSERT INTO jobs(id, key_id, created_ms, updated_ms, total, language, translate, format,"
                        " webhook_url, webhook_secret, source) VALUES(?,?,?,?,?,'en','','json','','','video_ids')",
                        (job, key_id, old, old, n))
            con.executemany("INSERT INTO items(job_id, seq, video_id, status, error_code, error_message)"
                            " VALUES(?,?,?,3,'transcript_not_available','No accessible transcript.')",
                            ((job, s + 1, "zz%09d" % (j * PER_JOB + s)) for s in range(n)))
    con.close()


def count(db_path, table="items"):
    """The rows of table (items or jobs) in the store."""
    con = sqlite3.connect(str(db_path), timeout=30)
    try:
        return con.execute("SELECT count(*) FROM %s" % table).fetchone()[0]
    finally:
        con.close()
