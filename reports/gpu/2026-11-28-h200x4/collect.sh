#!/usr/bin/env bash
# Copies what the runs left so far into $OUT (at most 8 files): one tarball of the run folders' small files and the
# logs, and the console logs' tails printed. Run as often as needed; the runs go on.
W=/root/work
cd $W || exit 1
tar -czf $OUT/raw.tar.gz --exclude='*/checkpoints/*' --exclude='*/trace/*' --exclude='*/rollouts/*' logs runs 2>/dev/null
for f in logs/start.log logs/a.log logs/b.log; do echo "== $f"; tail -n 20 $f 2>/dev/null; done
