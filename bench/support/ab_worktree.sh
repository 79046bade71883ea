# bench/support/ab_worktree.sh — sourced by the old-against-new benchmarks (bench/ab.sh, bench/ab_http.sh):
#   ab_worktree_build REV DIR_VAR TARGET...
#       checks REV out in a worktree (build-ab/src-SHA, kept for the next run), builds TARGETs there
#       (Release, bench on) in build-ab/old-SHA and stores that directory's path in the variable DIR_VAR;
#       sets old_sha and new_sha (this checkout's HEAD, "+uncommitted" when it has changes).
#   ab_build SRC DIR TARGET...
#       builds TARGETs of the checkout SRC in DIR as both sides are built (Release, bench on).
# The caller is at the checkout's root. (The locals are _ab_-prefixed: printf -v would set a local of
# the caller's DIR_VAR name instead.)
ab_build() {
  local _ab_from=$1 _ab_into=$2
  shift 2
  cmake -S "$_ab_from" -B "$_ab_into" -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON \
    -DFOLIO_TRACES_DIR="$PWD/bench/traces" >/dev/null
  cmake --build "$_ab_into" -j2 --target "$@" >/dev/null
}
ab_worktree_build() {
  local _ab_rev=$1 _ab_var=$2 _ab_src _ab_dir
  shift 2
  old_sha=$(git rev-parse --short=7 "$_ab_rev^{commit}")
  new_sha=$(git rev-parse --short=7 HEAD)
  git diff --quiet HEAD 2>/dev/null || new_sha+="+uncommitted"
  _ab_src=build-ab/src-$old_sha _ab_dir=build-ab/old-$old_sha
  [ -d "$_ab_src" ] || git worktree add -q --detach "$_ab_src" "$old_sha" >/dev/null
  ab_build "$_ab_src" "$_ab_dir" "$@"
  printf -v "$_ab_var" '%s' "$PWD/$_ab_dir"
}
