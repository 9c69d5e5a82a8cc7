"""The HTTP step the benchmark scripts share (run as scripts, they import it from their own folder)."""
import time


def timed(conn, method, path, body=None, headers=None):
    """One request on conn: (seconds to the whole answer, status, body)."""
    t0 = time.perf_counter()
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    return time.perf_counter() - t0, resp.status, data
