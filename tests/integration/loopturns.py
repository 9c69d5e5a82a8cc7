"""The loop-turn histograms of /metrics (vts_worker_loop_turn_seconds, vts_dispatcher_loop_turn_seconds and
vts_dispatcher_loop_turn_own_seconds), read as counts of turns between two scrapes (before None: since the process started)."""
import math
import re


def buckets(text, name):
    """The cumulative buckets of the histogram name in a /metrics text: [(upper bound in s, turns)], +Inf last."""
    out = []
    for m in re.finditer(r'^%s_bucket\{le="([^"]+)"\} (\d+)$' % re.escape(name), text, re.M):
        out.append((math.inf if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
    assert out and out[-1][0] == math.inf, "no histogram %s in /metrics" % name
    return out


def _pair(before, after, name):
    a = buckets(after, name)
    return ([(le, 0) for le, _ in a] if before is None else buckets(before, name)), a


def turns_over(before, after, name, bound_s):
    """The turns counted between the scrapes before and after that took longer than bound_s (one of its bounds)."""
    b, a = (dict(x) for x in _pair(before, after, name))
    assert bound_s in a, "%s has no bucket at %g s" % (name, bound_s)
    return (a[math.inf] - b[math.inf]) - (a[bound_s] - b[bound_s])


def turns(before, after, name):
    """How many turns were counted between the scrapes before and after."""
    b, a = _pair(before, after, name)
    return a[-1][1] - b[-1][1]


def longest(before, after, name):
    """The longest turn between the two scrapes, as the bounds of its bucket (lower, upper) in ms; None if no turn."""
    b, a = _pair(before, after, name)
    total, lower = a[-1][1] - b[-1][1], 0.0
    if total == 0:
        return None
    for (le, nb), (_, na) in zip(b, a):
        if na - nb == total:
            return (lower * 1000, le * 1000)
        lower = le
