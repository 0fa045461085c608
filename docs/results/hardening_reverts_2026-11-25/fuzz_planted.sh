#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A reader fault planted into a copy of data/ptb.cpp, fuzz_ptb relinked with it (the other objects
# as scripts/fuzz.sh built them in BUILD/obj) and run for at most 60 s from the committed seeds
# (docs/results/hardening_reverts_2026-11-25.md, finding 4). Run from the repository root after
# `scripts/fuzz.sh --build-dir BUILD ptb`.
#   fuzz_planted.sh BUILD batcher|tokenize|vocab_dup
set -euo pipefail
build=$1 fault=$2
work=$(mktemp -d)
case "$fault" in
  batcher) python3 - "$work" <<'PY'
import sys
s = open("data/ptb.cpp").read()
a = "  stream_len_ = n / batch_size_;\n"
assert s.count(a) == 1
open(sys.argv[1] + "/ptb.cpp", "w").write(s.replace(a, "  stream_len_ = (n + batch_size_ - 1) / batch_size_;\n"))
PY
  ;;
  tokenize) sed 's/      while (k < end \&\& !is_space(text\[k\])) ++k;/      while (k <= end \&\& !is_space(text[k])) ++k;/' \
              data/ptb.cpp >"$work/ptb.cpp" ;;
  vocab_dup) python3 - "$work" <<'PY'
import sys
s = open("data/ptb.cpp").read()
a = '''    ANVIL_CHECK(inserted, "Vocabulary", "duplicate word '", w, "' (ids ", it->second, " and ", i,
                ")");'''
assert s.count(a) == 1
open(sys.argv[1] + "/ptb.cpp", "w").write(s.replace(a, "    (void)it; (void)inserted;"))
PY
  ;;
  *) echo "unknown fault $fault" >&2; exit 2 ;;
esac
cmp -s data/ptb.cpp "$work/ptb.cpp" && { echo "the fault was not planted" >&2; exit 2; }
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -I.)
clang++ "${flags[@]}" -fsanitize=fuzzer-no-link -c "$work/ptb.cpp" -o "$work/ptb.o"
objs=()
for o in "$build"/obj/*.o; do [[ $o == */data_ptb.cpp.o ]] || objs+=("$o"); done
clang++ "${flags[@]}" -fsanitize=fuzzer tests/fuzz/fuzz_ptb.cpp "${objs[@]}" "$work/ptb.o" -lz -o "$work/fuzz_ptb"
mkdir -p "$work/corpus" "$work/art"
cp tests/fuzz/corpus/ptb/* "$work/corpus/"
nice -n 19 "$work/fuzz_ptb" "$work/corpus" -max_total_time=60 -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/art/" && echo "no finding in 60 s" || echo "finding: $(ls "$work/art")"
