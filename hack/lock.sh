# Sourced by the build scripts once $out is known, before they look for a cached build:
# one build of $out at a time. A second caller (make beside a test session, or two
# checkouts sharing the cache) waits here, then finds the build done; without it both
# wrote the same $out.tmp and the slower one failed on the faster one's rename.
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
