# Sourced by the build scripts: while Go compiles it prints nothing for minutes, so
# say every minute that the build is still at it. Sets `start` (seconds since the epoch).
start=$(date +%s)
(
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM  # take the sleep along, or it holds stderr open
  while :; do
    sleep 60 & nap=$!
    wait "$nap"
    echo "  ... still building ($(( $(date +%s) - start ))s)" >&2
  done
) &
progress_ticker=$!
trap 'kill "$progress_ticker" 2>/dev/null || true' EXIT
