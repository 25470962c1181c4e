#!/bin/sh
# A short send to a receiver on loopback (no root): the sender's JSON carries the
# receiver's report, and the counts agree with each other. Bounded: 0.3 s of load.
set -eu
B=${BLAST:-build/blast}
PORT=$((20000 + $$ % 20000))
OUT=$(mktemp -d)
trap 'kill $RPID 2>/dev/null || true; rm -rf "$OUT"' EXIT
$B recv --addr 127.0.0.1 --port $PORT --flows 2 --duration 10 >"$OUT/recv" &
RPID=$!
i=0; until grep -q ready "$OUT/recv" 2>/dev/null; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.05; done
$B send --addr 127.0.0.1 --port $PORT --flows 2 --size 64 --rate 20000 --duration 0.3 >"$OUT/send"
kill -TERM $RPID; wait $RPID
python3 - "$OUT/send" "$OUT/recv" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read())
r = [json.loads(x) for x in open(sys.argv[2]) if x.strip()][-1]
assert s["blast"] == "send" and r["blast"] == "recv", (s, r)
assert s["sent"] > 0 and s["receiver"] is not None, s
assert s["receiver"]["packets"] <= s["sent"] and r["packets"] >= s["receiver"]["packets"], (s, r)
assert s["receiver"]["bytes"] == 64 * s["receiver"]["packets"], s
print(f"loopback: ok (sent {s['sent']}, received {s['receiver']['packets']})")
PY
# bad input: one line, exit 2
if $B send --addr 127.0.0.1 --size 10 2>"$OUT/err"; then exit 1; else [ $? -eq 2 ]; fi
grep -q '^blast: --size 10 is under' "$OUT/err"
