# shellcheck shell=bash
# Sourced by the language-model study's scripts that run a build (results/run_lm2.sh and
# lm2_tables.sh): the one check that the code a build runs is the code of the commit it names, so
# that the commit written into each run file and table is the code that made it.
#
# BUILD_SOURCES: what a build and the scripts it runs read, the folders and files of the checkout
# (a path from its root) that must be the build's commit's
BUILD_SOURCES=(core bindings tasks text repl scripts Makefile)

# build_check ROPER REMEDY [PATH ...]: prints the commit the interpreter ROPER was built from
# (rp.build_info().commit) and returns 0 when it is a build of a commit and, in a git checkout,
# the checkout has that commit and its working tree's BUILD_SOURCES and PATHs (untracked files
# included) are that commit's; otherwise prints the reason instead (one line, ending with REMEDY,
# what builds it again) and returns 2; ROPER's own errors go to stderr. ROPER must be an
# executable file (the callers say what to do when it is missing); runs from the checkout's root.
build_check() {
  local roper=$1 remedy=$2 commit
  shift 2
  local paths=("${BUILD_SOURCES[@]}" "$@")
  commit=$("$roper" -e 'print(rp.build_info().commit)') ||
    { echo "$roper does not run: $remedy"; return 2; }
  case "$commit" in
    *dirty* | unknown | "")
      echo "$roper is a build of '$commit', not of a commit: commit, then $remedy"
      return 2 ;;
  esac
  if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    if ! git cat-file -e "$commit^{commit}" 2> /dev/null; then
      echo "$roper is a build of $commit, which this checkout does not have: $remedy"
      return 2
    fi
    if ! git diff --quiet "$commit" -- "${paths[@]}" ||
       [ -n "$(git ls-files --others --exclude-standard -- "${paths[@]}")" ]; then
      echo "$roper is a build of $commit, and this checkout's scripts or sources differ from" \
        "that commit's: commit them, then $remedy"
      return 2
    fi
  fi
  echo "$commit"
}
