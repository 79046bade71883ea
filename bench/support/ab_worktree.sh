# bench/support/ab_worktree.sh — sourced by the old-against-new benchmarks (bench/ab.sh, bench/ab_http.sh):
#   ab_worktree_build REV DIR_VAR TARGET...
#       checks REV out in a worktree (build-ab/src-SHA, kept for the next run), builds TARGETs there
#       (Release, bench on) in build-ab/old-SHA and stores that directory's path in the variable DIR_VAR;
#       sets old_sha and new_sha (this checkout's HEAD, "+uncommitted" when it has changes).
# The caller is at the checkout's root.
ab_worktree_build() {
  local rev=$1 var=$2 src dir
  shift 2
  old_sha=$(git rev-parse --short=7 "$rev^{commit}")
  new_sha=$(git rev-parse --short=7 HEAD)
  git diff --quiet HEAD 2>/dev/null || new_sha+="+uncommitted"
  src=build-ab/src-$old_sha dir=build-ab/old-$old_sha
  [ -d "$src" ] || git worktree add -q --detach "$src" "$old_sha" >/dev/null
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON \
    -DFOLIO_TRACES_DIR="$PWD/bench/traces" >/dev/null
  cmake --build "$dir" -j2 --target "$@" >/dev/null
  printf -v "$var" '%s' "$PWD/$dir"
}
