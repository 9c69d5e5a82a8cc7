#!/usr/bin/env bash
# The habits the build enforces, over the files git tracks (run by tests/run.sh; run it alone before a commit):
#   1. every C file is formatted by the repository's .clang-format (clang-format --dry-run -Werror);
#   2. production C (common/, proto/, gateway/, fetcher/) calls none of the banned functions: unbounded or
#      non-reentrant ones (sprintf, strcpy, strtok, gmtime, ...) and parsers without error reporting (atoi, ...);
#   3. no circle of includes between production modules (a .c and its .h are one module), no fetcher folder
#      includes one above it (the order below: the process, the job's course, speech, the platform client, captions,
#      egress, the shared readers), and no gateway folder includes one of its floor or above (the floors below: the
#      master, the HTTP workers, the dispatcher, then what they use: jobs, limits, cache, then keys, metrics, redis);
#   4. no runtime file is tracked (quota snapshots, state/, IPC sockets, logs);
#   5. no bare sleep in tests/ (Python's time.sleep anywhere, C's sleep, usleep and nanosleep in tests/unit): a
#      test waits on the event it needs (a message, a counter, a socket state) with a bounded poll. A sleep stays only
#      with its reason on its line: "the wait is the test: ..." (the behaviour under test is a length of time: an idle
#      connection, a slow peer, an expiry) or "poll interval: ..." (the pause between two checks of a bounded poll).
# Prints every offence as file:line and exits 1 when there is any. VTS_STYLE_ROOT checks another tree (its tests).
set -uo pipefail
root=${VTS_STYLE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
command -v clang-format >/dev/null || { echo "style: clang-format is not installed"; exit 1; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "style: $root is not a git checkout"; exit 1; }

failed=0
offence() { # what, then the offending lines on stdin
  local what=$1 lines
  lines=$(cat)
  [ -z "$lines" ] && return 0
  echo "style: $what"
  printf '%s\n' "$lines" | sed 's/^/  /'
  failed=1
}

# Tracked files and new ones not ignored yet, as they are in the working tree.
files() { git ls-files --cached --others --exclude-standard -- "$@" | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done; }
mapfile -t c_files < <(files '*.c' '*.h')
mapfile -t prod_c < <(files 'common/*.[ch]' 'proto/*.[ch]' 'gateway/*.[ch]' 'fetcher/*.[ch]')

# clang-format names each unformatted place as "file:line:col: error: code should be clang-formatted".
if [ ${#c_files[@]} -gt 0 ]; then
  offence "not formatted (run clang-format -i on these files)" < <(clang-format --dry-run -Werror "${c_files[@]}" 2>&1 |
    grep -E '^[^ ]+:[0-9]+:[0-9]+: error' | cut -d: -f1,2 | sort -u)
fi

# A call is the name followed by '('; snprintf, gmtime_r and strtoll do not match.
banned='sprintf|vsprintf|strcpy|strcat|strncat|strtok|gmtime|localtime|asctime|ctime|atoi|atol|atoll|atof|gets|tmpnam|mktemp'
if [ ${#prod_c[@]} -gt 0 ]; then
  offence "banned function (use snprintf, buf_*, strtok_r, gmtime_r, util_parse_i64)" < <(grep -nE \
    "(^|[^A-Za-z0-9_])($banned)[[:space:]]*\(" "${prod_c[@]}")
fi

# Modules (a .c and its .h) of production code include each other in one direction only: no circle of includes.
if [ ${#prod_c[@]} -gt 0 ]; then
  offence "include circle (move what both sides need into a header of its own)" < <(python3 - "${prod_c[@]}" <<'PY'
import re, sys
deps = {}
for f in sys.argv[1:]:
    mod = f.rsplit(".", 1)[0]
    with open(f, encoding="utf-8", errors="replace") as src:
        for line in src:
            m = re.match(r'\s*#\s*include\s+"([^"]+)\.[ch]"', line)
            if m and m.group(1) != mod:
                deps.setdefault(mod, set()).add(m.group(1))
state, path, seen = {}, [], set()
def visit(m):
    state[m] = 1
    path.append(m)
    for d in sorted(deps.get(m, ())):
        if state.get(d) == 1:
            circle = " -> ".join(path[path.index(d):] + [d])
            if circle not in seen:
                seen.add(circle)
                print(circle)
        elif d in deps and not state.get(d):
            visit(d)
    path.pop()
    state[m] = 2
for m in sorted(deps):
    if not state.get(m):
        visit(m)
PY
  )
fi

# The fetcher's folders form a tree by the path of a job, the gateway's are floors from its processes down to what
# they share: a folder includes only itself and the floors below it, never a folder of its own floor or one above.
# A floor is a list of folders separated by spaces, the floors are separated by '|', the highest first.
fetcher_order=(process course speech platform captions egress readers)
gateway_floors='master|http|dispatcher|jobs limits cache|keys metrics redis'
upward_includes() { # tree, floors
  python3 - "$1" "$2" "${prod_c[@]}" <<'PY'
import re, sys
tree, floors = sys.argv[1], sys.argv[2].split("|")
floor = {folder: n for n, row in enumerate(floors) for folder in row.split()}
for f in sys.argv[3:]:
    parts = f.split("/")
    if parts[0] != tree or len(parts) < 3:
        continue
    if parts[1] not in floor:
        print(f"{f}: the folder {tree}/{parts[1]} has no place in the order")
        continue
    with open(f, encoding="utf-8", errors="replace") as src:
        for n, line in enumerate(src, 1):
            m = re.match(r'\s*#\s*include\s+"' + tree + r'/([^/"]+)/', line)
            if m and m.group(1) != parts[1] and floor.get(m.group(1), -1) <= floor[parts[1]]:
                print(f"{f}:{n}: includes {tree}/{m.group(1)}")
PY
}
if [ ${#prod_c[@]} -gt 0 ]; then
  offence "upward include between the fetcher's folders (order: ${fetcher_order[*]})" < <(upward_includes fetcher \
    "$(IFS='|'; echo "${fetcher_order[*]}")")
  offence "upward include between the gateway's folders (floors: $(sed 's/ /, /g; s/|/ > /g' <<<"$gateway_floors"))" \
    < <(upward_includes gateway "$gateway_floors")
fi

# A sleep's reason is a comment on its own line.
sleep_reason='(#|//|/\*).*(the wait is the test|poll interval): [^ ]'
mapfile -t test_py < <(files 'tests/*.py' 'tests/*.sh')
mapfile -t test_c < <(files 'tests/unit/*.[ch]')
offence "bare sleep in a test (wait for the event with a bounded poll, or give the reason on its line: \"the wait is \
the test: ...\" or \"poll interval: ...\")" < <({
  [ ${#test_py[@]} -gt 0 ] && grep -HnE '(^|[^A-Za-z0-9_])time\.sleep[[:space:]]*\(' "${test_py[@]}"
  [ ${#test_c[@]} -gt 0 ] && grep -HnE '(^|[^A-Za-z0-9_.>])(sleep|usleep|nanosleep)[[:space:]]*\(' "${test_c[@]}"
} | grep -vE "$sleep_reason")

offence "runtime file tracked (git rm --cached it; .gitignore covers it)" < <(git ls-files |
  grep -E '(^|/)state/|\.snapshot$|\.ipc$|\.log$|\.pid$|(^|/)core(\.[0-9]+)?$')

[ $failed -eq 0 ] && echo "style: ok (${#c_files[@]} C files formatted, ${#prod_c[@]} production files free of banned calls)"
exit $failed
