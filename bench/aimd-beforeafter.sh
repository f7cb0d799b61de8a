#!/usr/bin/env bash
# aimd-beforeafter.sh: the politeness benches of two or more commits, alternated on one machine.
#
#   bench/aimd-beforeafter.sh [-n ROUNDS] [-b BENCHES] [-o DIR] [-c] REF_A REF_B [REF_C...]
#   bench/aimd-beforeafter.sh -t DIR [SPREAD_DIR...]   (the table of the logs already in DIR)
#
# Each ref is exported with `git archive` (from the repository this script sits in, or $REPO)
# into $BUILD/src-COMMIT and built there into $BUILD/bin-COMMIT (cmd/crawl, crawlbench,
# limiterbench, transportbench; BUILD defaults to /tmp/aimd-ab): the checkout the script runs
# from is never built or changed. DIR (-o) defaults to $BUILD/COMMIT_A-COMMIT_B. Then, for each
# of ROUNDS rounds, each bench runs with A's binaries, then B's, then C's, and so on. Every run's
# output goes to DIR/logs/ROUND-SIDE-BENCH.log between two load lines; the table is read from
# those logs. A run that exits non-zero, or outlives its bound (a hang: it gets SIGQUIT, which
# leaves its goroutine dump in the log), is kept as ROUND-SIDE-BENCH.failed and run once more.
#
# BENCHES (comma-separated; default pol1,pol4,lim,learned,stated,colly,broad1k,broad10k):
#   pol1      crawlbench -scenario politeness                 (the simulated web; its burst host)
#   pol4      crawlbench -scenario politeness -scale 4         (-c: -scale 2)
#   learned   crawlbench -scenario politeness -learned         (the second crawl's figures)
#   stated    crawlbench -scenario stated
#   lim       limiterbench                                     (all sites at once)
#   limvh     limiterbench -only vhost10,req10                 (not in the default set)
#   limvhip   limiterbench -only vhost10,req10 -key-by-ip      (not in the default set)
#   limev     limiterbench -only evasive50                     (not in the default set)
#   colly     transportbench                                   (the hostlimit.NewTransport row)
#   broad1k   crawlbench -scenario broad -hosts 1000 -host-pages 30 -host-limit 5
#   broad10k  crawlbench -scenario broad -hosts 10000 -host-pages 5 -host-limit 5
#                                                              (-c: -throughput-pages 2000 on both)
# -c (compact) shortens the two benches marked, the same for A and B; the table says so.
#
# The table gives, for each figure, each ref's runs in order, each with the 1-minute load
# average before and after it, and a verdict on the row's first figure for each other ref: its
# median against the range of A's runs widened by one unit of the figure's last printed digit
# (within spread, better, worse). With A = B it measures the spread itself.
set -euo pipefail

rounds=2 benches=pol1,pol4,lim,learned,stated,colly,broad1k,broad10k out= compact=0 tableonly=
build=${BUILD:-/tmp/aimd-ab}
while getopts "n:b:o:ct:" opt; do
	case $opt in
	n) rounds=$OPTARG ;;
	b) benches=$OPTARG ;;
	o) out=$OPTARG ;;
	c) compact=1 ;;
	t) tableonly=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
repo=${REPO:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || true)}

# build REF prints the commit's short hash after building its binaries into $build/bin-COMMIT.
buildref() {
	local c
	c=$(git -C "$repo" rev-parse --short=7 "$1^{commit}")
	if [[ ! -x $build/bin-$c/transportbench ]]; then
		rm -rf "$build/src-$c" "$build/bin-$c"
		mkdir -p "$build/src-$c" "$build/bin-$c"
		git -C "$repo" archive "$c" | tar -x -C "$build/src-$c"
		(cd "$build/src-$c" && nice -n 10 go build -o "$build/bin-$c/crawl" ./cmd/crawl) >&2
		(cd "$build/src-$c/bench" && nice -n 10 go build -o "$build/bin-$c/" ./crawlbench ./limiterbench ./transportbench) >&2
	fi
	echo "$c"
}

# command BENCH BIN prints the bench's command line with the binaries of BIN.
command() {
	local thr=()
	[[ $compact == 1 ]] && thr=(-throughput-pages 2000)
	case $2 in
	pol1) echo "$1/crawlbench -scenario politeness" ;;
	pol4) echo "$1/crawlbench -scenario politeness -scale $((compact == 1 ? 2 : 4))" ;;
	learned) echo "$1/crawlbench -scenario politeness -learned" ;;
	stated) echo "$1/crawlbench -scenario stated" ;;
	lim) echo "$1/limiterbench" ;;
	limvh) echo "$1/limiterbench -only vhost10,req10" ;;
	limvhip) echo "$1/limiterbench -only vhost10,req10 -key-by-ip" ;;
	limev) echo "$1/limiterbench -only evasive50" ;;
	colly) echo "$1/transportbench" ;;
	broad1k) echo "$1/crawlbench -scenario broad -hosts 1000 -host-pages 30 -host-limit 5 -crawl $1/crawl ${thr[*]}" ;;
	broad10k) echo "$1/crawlbench -scenario broad -hosts 10000 -host-pages 5 -host-limit 5 -crawl $1/crawl ${thr[*]}" ;;
	*) echo "unknown bench $2" >&2; return 1 ;;
	esac
}

# figures LOG BENCH prints "row<TAB>figures" lines from one run's log; the first field of each
# figure list is the row's headline figure.
figures() {
	awk -v bench="$2" '
	BEGIN { second = 0 }
	/^load / { next }
	bench ~ /^pol|^learned/ && /again from a new directory/ { second = 1 }
	bench ~ /^pol|^learned/ && /^overall: completeness/ {
		match($0, /completeness [0-9.]+/); comp = substr($0, RSTART + 13, RLENGTH - 13)
		match($0, /over-limit replies [0-9]+ = [0-9.]+%/); ov = substr($0, RSTART + 19, RLENGTH - 19); sub(/ = /, " ", ov)
		match($0, /Retry-After [0-9]+/); ra = substr($0, RSTART + 12, RLENGTH - 12)
		match($0, /bans [0-9]+/); bans = substr($0, RSTART + 5, RLENGTH - 5)
		o[second] = comp "/" ov "/" ra "/" bans
	}
	bench ~ /^pol|^learned/ && /^of the ideal: the web/ { web[second] = $6 }
	bench ~ /^pol/ && $1 == "burst" && !second { burst = $11 "/" $6 }
	bench ~ /^pol/ && $1 == "drop" && !second { drop = $11 "/" $6 }
	bench ~ /^pol/ && $1 == "free1" && !second { free = $9 }
	bench ~ /^pol/ && /^drop: limit dropped/ && !second { match($0, /back under the new limit [^ ]+/); back = substr($0, RSTART + 25, RLENGTH - 25) }
	bench == "stated" && /^stating:/ {
		match($0, /least share of the ideal [0-9.]+/); least = substr($0, RSTART + 25, RLENGTH - 25)
		match($0, /most refused on a host [0-9.]+%/); most = substr($0, RSTART + 23, RLENGTH - 23)
		match($0, /refused [0-9]+ of [0-9]+/); ref = substr($0, RSTART + 8, RLENGTH - 8)
		print "stated: least share of the ideal / most refused on a host / refused\t" least "/" most "/" ref
	}
	bench ~ /^lim/ && /^ *site +limiter/ { inrows = 1; next }
	bench ~ /^lim/ && inrows && NF > 8 && $1 != "overall:" {
		print bench " " $1 ": ratio / refused / complete\t" $(NF - 1) "/" $(NF - 6) "/" $(NF - 7)
	}
	bench ~ /^lim/ && /^overall: completeness/ {
		inrows = 0
		match($0, /refusals [0-9]+ = [0-9.]+%/); r = substr($0, RSTART + 9, RLENGTH - 9); sub(/ = /, " ", r)
		print bench " all sites: refused / completeness\t" r "/" $3
	}
	bench == "colly" && /hostlimit.NewTransport/ {
		print "colly+NewTransport: ratio / 429s / in Retry-After / complete\t" $NF "/" $(NF - 4) "/" $(NF - 3) "/" $(NF - 5)
	}
	bench ~ /^broad/ && /^  pages / { bp = $2 " of " $4 }
	bench ~ /^broad/ && /^  429s / { b429 = $2 " " $4 }
	bench ~ /^broad/ && /^  in Retry-After/ { bra = $3 }
	bench ~ /^broad/ && /^  wall / { match($0, /ratio [0-9.]+/); bratio = substr($0, RSTART + 6, RLENGTH - 6) }
	END {
		if (bench ~ /^pol/) {
			print bench " web: of the ideal / completeness / over-limit / in Retry-After / bans\t" web[0] "/" o[0]
			print bench " burst host: ratio / over-limit\t" burst
			print bench " drop host: ratio / over-limit / back under the new limit after\t" drop "/" back
			print bench " free1, an unlimited host (how starved the crawler was): makespan\t" free
		}
		if (bench == "learned")
			print "learned, 2nd crawl: of the ideal / completeness / over-limit / in Retry-After / bans\t" web[1] "/" o[1]
		if (bench ~ /^broad/)
			print bench ": wall ratio / 429s / in Retry-After / pages\t" bratio "/" b429 "/" bra "/" bp
	}' "$1"
}

# table DIR [SPREAD_DIR...] prints the table of the logs in DIR/logs. Runs of A's commit in the
# SPREAD_DIRs (other runs of this script, on either side) widen A's spread for the verdict.
table() {
	local dir=$1 a
	read -r a _ <"$dir/commits"
	{
		for d in "$@"; do
			for log in "$d"/logs/*.log; do
				local base round side bench l c
				base=$(basename "$log" .log)
				round=${base%%-*} side=${base#*-} side=${side%%-*} bench=${base#*-*-}
				c=$(awk '/^commit /{sub(/:$/, "", $2); print $2; exit}' "$log")
				if [[ $d != "$dir" ]]; then
					[[ $c == "$a" ]] || continue
					side=S
				fi
				l=$(awk '/^load /{printf "%s%s", (n++ ? "-" : ""), $2}' "$log")
				[[ $l == *-* ]] || continue # still running
				figures "$log" "$bench" | while IFS=$'\t' read -r row figs; do
					printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$bench" "$row" "$side" "$round" "${figs:-(none: see $log)}" "$l"
				done
			done
		done
	} | sort -t$'\t' -k1,1 -k2,2 -k3,3 -k4,4n | awk -F'\t' -v order="$(cat "$dir/benches")" -v commits="$(cat "$dir/commits")" -v spread=$(($# > 1)) '
	function num(s) { gsub(/[x%]/, "", s); return s + 0 }
	function median(v, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	BEGIN {
		split("A B C D E F", side, " ")
		nsides = split(commits, commit, " ")
		printf "| bench: figures |"
		for (j = 1; j <= nsides; j++) {
			printf " %s runs (load before-after) |", side[j]
			if (j == 1 && spread) printf " A runs in the spread directories |"
		}
		for (j = 2; j <= nsides; j++) printf " %s: verdict on the first figure |", side[j]
		printf "\n|---|"
		for (j = 2; j <= 2 * nsides + spread; j++) printf "---|"
		printf "\n"
	}
	{
		key = $2
		if (!(key in seen)) { seen[key] = 1; keys[++nk] = key; bench[key] = $1 }
		cell[key, $3] = cell[key, $3] (cell[key, $3] == "" ? "" : "; ") $5 " (L" $6 ")"
		split($5, f, "/")
		if (f[1] != "-" && f[1] != "") {
			n[key, $3]++; v[key, $3, n[key, $3]] = num(f[1])
			# One unit of the last printed digit of the figure: smaller differences are not seen.
			d = f[1]; sub(/ .*/, "", d); gsub(/[^0-9.]/, "", d)
			unit[key] = index(d, ".") ? 10 ^ -(length(d) - index(d, ".")) : 1
		}
	}
	END {
		nb = split(order, ob, ",")
		for (b = 1; b <= nb; b++) for (k = 1; k <= nk; k++) {
			key = keys[k]
			if (bench[key] != ob[b]) continue
			# Higher is better for "of the ideal" and "least share"; lower for the rest.
			up = key ~ /of the ideal|least share/
			lo = 1e18; hi = -1e18; na = 0
			for (s = 1; s <= 2; s++) {
				sd = s == 1 ? "A" : "S"
				for (i = 1; i <= n[key, sd]; i++) { x = v[key, sd, i]; na++; if (x < lo) lo = x; if (x > hi) hi = x }
			}
			printf "| %s |", key
			for (j = 1; j <= nsides; j++) {
				printf " %s |", cell[key, side[j]]
				if (j == 1 && spread) printf " %s |", cell[key, "S"]
			}
			for (j = 2; j <= nsides; j++) {
				verdict = "-"
				nw = n[key, side[j]]
				for (i = 1; i <= nw; i++) w[i] = v[key, side[j], i]
				if (commit[j] == commit[1])
					verdict = "(the same commit as A: this is the spread)"
				else if (na > 0 && nw > 0) {
					m = median(w, nw)
					if (m >= lo - unit[key] * 1.001 && m <= hi + unit[key] * 1.001) verdict = "within spread"
					else if ((up && m > hi) || (!up && m < lo)) verdict = "better"
					else verdict = "worse"
					verdict = verdict sprintf(" (median %g; A %g–%g, %d runs)", m, lo, hi, na)
				}
				printf " %s |", verdict
			}
			printf "\n"
		}
	}'
}

# bound BENCH prints the seconds after which a run of BENCH is taken for hung: several times
# its longest run seen at load 30.
bound() {
	case $1 in
	pol1 | stated | colly) echo 300 ;;
	learned) echo 480 ;;
	*) echo 900 ;;
	esac
}

# runbench COMMIT BENCH runs one bench with COMMIT's binaries, its output between two load lines.
# A run past its bound gets SIGQUIT: its goroutine dump goes to the log, which then counts as
# failed.
runbench() {
	echo "load $(awk '{print $1}' /proc/loadavg) $(date -u +%H:%M:%S)"
	echo "commit $1: $(command "$build/bin-$1" "$2")"
	(cd "$build/src-$1/bench" && timeout -s QUIT "$(bound "$2")" $(command "$build/bin-$1" "$2")) 2>&1 || echo "exit status $?"
	echo "load $(awk '{print $1}' /proc/loadavg) $(date -u +%H:%M:%S)"
}

if [[ -n $tableonly ]]; then
	cat "$tableonly/header"
	(($# > 0)) && echo "A's spread also from the runs of its commit in: $*"
	echo
	table "$tableonly" "$@"
	exit 0
fi

(($# >= 2)) || { sed -n '2,7p' "$0" >&2; exit 2; }
commits=() sides=(A B C D E F)
for ref in "$@"; do commits+=("$(buildref "$ref")"); done
(($# <= ${#sides[@]})) || { echo "at most ${#sides[@]} refs" >&2; exit 2; }
out=${out:-$build/$(IFS=-; echo "${commits[*]}")}
mkdir -p "$out/logs"
echo "$benches" >"$out/benches"
echo "${commits[*]}" >"$out/commits"
{
	printf 'date %s; %d rounds, each bench run on' "$(date -u +'%Y-%m-%d %H:%M UTC')" "$rounds"
	for i in "${!commits[@]}"; do printf ' %s = %s (%s),' "${sides[i]}" "${@:i+1:1}" "${commits[i]}"; done
	echo " in that order"
	[[ $compact == 1 ]] && echo "compact: politeness at -scale 2 instead of 4; broad crawls with -throughput-pages 2000"
	echo "commands: $(for x in ${benches//,/ }; do printf '%s: %s; ' "$x" "$(command BIN "$x" | sed "s|BIN/||g")"; done)"
} >"$out/header"
cat "$out/header"
for ((r = 1; r <= rounds; r++)); do
	for x in ${benches//,/ }; do
		for i in "${!commits[@]}"; do
			c=${commits[i]} log=$out/logs/$r-${sides[i]}-$x.log
			echo "round $r ${sides[i]} ($c) $x: $(uptime)" >&2
			runbench "$c" "$x" >"$log"
			if grep -q '^exit status' "$log"; then
				# A run that failed (a server that logged nothing, a port taken by other work,
				# a hang stopped at its bound) has no figures: it is kept as .failed, out of
				# the table, and run once more.
				mv "$log" "${log%.log}.failed"
				echo "round $r ${sides[i]} ($c) $x failed (${log%.log}.failed), once more: $(uptime)" >&2
				runbench "$c" "$x" >"$log"
			fi
		done
	done
done
"$0" -t "$out"
