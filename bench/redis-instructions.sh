#!/usr/bin/env bash
# redis-instructions.sh: Redis' instructions per new URL in BenchmarkRedisNewURL, a count that
# does not move with the machine's load (its CPU time moves twofold within the hour on a shared
# machine; BENCHMARKS.md "Redis work per new URL").
#
#   bench/redis-instructions.sh [TESTBIN]
#
# TESTBIN is a test binary of internal/fleet (`go test -c -o BIN ./internal/fleet`); without
# it, the package of the checkout this script sits in is built. The benchmark's redis-server
# runs under valgrind's callgrind with counting off; counting starts when the benchmark resets
# Redis' statistics (CONFIG RESETSTAT, right before the completions: seen by INFO stats'
# total_commands_processed dropping) and the count is read when the server exits. It prints
# the instructions executed (Ir) over the completions and per new URL, then the ten functions
# of most instructions with their callees (callgrind_annotate --inclusive). One run takes about
# three minutes; the count moves by well under 1% between runs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
for t in valgrind callgrind_control callgrind_annotate redis-cli redis-server ss; do
	command -v "$t" >/dev/null || { echo "redis-instructions.sh: $t is not installed" >&2; exit 2; }
done
work=$(mktemp -d /tmp/redis-instructions.XXXXXX)
bin=${1:-}
if [[ -z $bin ]]; then
	bin=$work/fleet.test
	go -C "$here" test -c -o "$bin" ./internal/fleet
fi
real=$(command -v redis-server)
mkdir "$work/path"
cat >"$work/path/redis-server" <<EOF
#!/usr/bin/env bash
exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$work/callgrind.out.%p "$real" "\$@" 2>>$work/valgrind.log
EOF
chmod +x "$work/path/redis-server"
(cd "$here/internal/fleet" && PATH=$work/path:$PATH exec "$bin" -test.run '^$' -test.bench "^${REDIS_BENCH:-BenchmarkRedisNewURL}$" -test.benchtime 1x) >"$work/bench.log" 2>&1 &
test=$!
srv=""
for _ in $(seq 1 1000); do
	srv=$(pgrep -P "$test" -f redis-server | head -1 || true)
	[[ -n $srv ]] && break
	sleep 0.05
done
[[ -n $srv ]] || { echo "redis-instructions.sh: no redis-server started (see $work/bench.log)" >&2; exit 1; }
port="" last="" on=""
while kill -0 "$test" 2>/dev/null; do
	[[ -z $port ]] && port=$(ss -ltnp 2>/dev/null | grep "pid=$srv," | grep -o '127.0.0.1:[0-9]*' | head -1 | cut -d: -f2 || true)
	if [[ -n $port ]]; then
		n=$(redis-cli -p "$port" info stats 2>/dev/null | grep total_commands_processed | tr -dc 0-9 || true)
		if [[ -n $n && -n $last && $n -lt $last ]]; then
			callgrind_control -i on "$srv" >/dev/null 2>&1
			on=$(redis-cli -p "$port" info commandstats | grep -o 'cmdstat_evalsha:calls=[0-9]*' | cut -d= -f2 || true)
			on=${on:-0}
			break
		fi
		last=$n
	fi
	sleep 0.1
done
wait "$test" || { echo "redis-instructions.sh: the benchmark failed (see $work/bench.log)" >&2; exit 1; }
sleep 1
[[ -n $on ]] || { echo "redis-instructions.sh: counting never started" >&2; exit 1; }
out=$(ls "$work"/callgrind.out.*)
callgrind_annotate "$out" >"$work/annotate.txt"
callgrind_annotate --inclusive=yes "$out" >"$work/inclusive.txt"
ir=$(grep 'PROGRAM TOTALS' "$work/annotate.txt" | awk '{print $1}' | tr -d ,)
# the completions counted: those after the first $on (each batch completes the same number of
# new URLs)
urls=$(grep -o '[0-9]* pages in batches of [0-9]*, [0-9]* links each, [0-9]* new' "$work/bench.log" |
	awk -v on="$on" '{gsub(",", ""); print int(($1 - on * $6) * $10)}')
echo "completions counted after the first $on scripts: $ir instructions, $((ir / urls)) per new URL ($urls new URLs)"
grep -v '^$' "$work/inclusive.txt" | sed -n '/file:function/,$p' | sed -n 3,12p | cut -c1-120
echo "(callgrind output: $out; annotated: $work/annotate.txt, $work/inclusive.txt)"
