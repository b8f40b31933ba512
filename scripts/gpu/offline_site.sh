#!/usr/bin/env bash
# A lean offline set as one unpacked site folder, carried in pieces to a GPU node without network, then the project
# installed into it (the way the GPU runs of docs/gpu.md install):
#
#   # on a machine with the wheels (bash scripts/gpu/wheelhouse.sh sglang WHEELHOUSE), any Python:
#   TRIM_FA3=1 bash scripts/gpu/offline_site.sh pack WHEELHOUSE OUT_DIR    # OUT_DIR/site.partNN (49 MB each), sha256
#   # on the node (Python 3.12, torch preinstalled), from a checkout of this repository:
#   bash scripts/gpu/offline_site.sh install PIECES_DIR SITE_DIR           # joins, checks, unpacks, installs the project,
#                                                                          # compiles the site's bytecode
#   eval "$(bash scripts/gpu/offline_site.sh env SITE_DIR)"                # PYTHONPATH: the checkout, then SITE_DIR/site
#
# pack: `pip install --no-index --no-deps --target` for Python 3.12 manylinux x86-64 (the node's image keeps its torch,
# and the site's transformers shadows the image's); TRIM_FA3=1 leaves out sgl_kernel/flash_ops.abi3.so (1 GB, 2/3 of
# the set): only SGLang's FlashAttention-3 paths load it (attention_backend fa3, vision and audio models), never the
# triton attention backend that train_grpo_step.sh gives SGLang; a run that needs it stops with sgl_kernel's
# "Can not import FA3 in sgl_kernel". gzip -1 (the default): fast on a busy 2-core machine; COMPRESS=xz packs ~30%
# smaller (fewer pieces to carry) for a few minutes more; install reads either.
# install: the project (`mr_search`, `mr_search_retrieval`, `mr_search_embedded`) as regular installs into the same
# folder, so verl finds the plugin's entry point; `env` puts the checkout first, so its code is what runs. Then the
# whole site is compiled to bytecode with the node's Python (`compile SITE_DIR`, all cores; COMPILE_BYTECODE=0 leaves
# it out): the pieces carry sources only (pack's --no-compile keeps them small), and without bytecode the first
# process to import verl, SGLang or transformers compiles their sources on the way, inside the training run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PIECE_SIZE="${PIECE_SIZE:-49M}"
COMPRESS="${COMPRESS:-gzip}"   # gzip (-1) | xz (-3, all cores)
die() { echo "offline_site.sh: $*" >&2; exit 1; }

case "${1:-}" in
  pack)
    [[ $# == 3 ]] || die "usage: pack WHEELHOUSE OUT_DIR"
    case "$COMPRESS" in
      gzip) squeeze=(gzip -1) ;;
      xz) squeeze=(xz -T0 -3) ;;
      *) die "COMPRESS=$COMPRESS is not valid; use gzip (the default) or xz" ;;
    esac
    wheelhouse="$(realpath "$2")" out="$(realpath -m "$3")"
    PYTHON="${PYTHON:-python3}"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    source "$ROOT/scripts/gpu/platforms.sh"   # the wheelhouse's platforms: every wheel it downloads installs
    mapfile -t wheels < <(find "$wheelhouse" -maxdepth 1 -name '*.whl' ! -name 'mr_search-*' | sort)
    ((${#wheels[@]})) || die "no wheels in $wheelhouse"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" \
      --python-version 3.12 --implementation cp --only-binary=:all: "${NODE_PLATFORM_ARGS[@]}" "${wheels[@]}"
    if [[ "${TRIM_FA3:-0}" == 1 ]]; then
      rm -f "$work/site/sgl_kernel/flash_ops.abi3.so"
      echo "offline_site.sh: left out sgl_kernel/flash_ops.abi3.so (FlashAttention-3; not used with triton attention)"
    fi
    mkdir -p "$out"
    rm -f "$out"/site.part*
    tar -C "$work" -cf - site | "${squeeze[@]}" | split -b "$PIECE_SIZE" -d -a 2 - "$out/site.part"
    (cd "$out" && cat site.part* | sha256sum | cut -d' ' -f1 >site.sha256)
    echo "offline_site.sh: ${#wheels[@]} wheels -> $(ls "$out"/site.part* | wc -l) pieces in $out ($(du -sh "$out" | cut -f1))"
    ;;
  install)
    [[ $# == 3 ]] || die "usage: install PIECES_DIR SITE_DIR"
    pieces="$2" site="$(realpath -m "$3")" compile="${COMPILE_BYTECODE:-1}"
    [[ "$compile" == 0 || "$compile" == 1 ]] \
      || die "COMPILE_BYTECODE=$compile is not valid; use 1 (compile the site to bytecode, the default) or 0"
    PYTHON="${PYTHON:-python3}"
    if [[ -f "$pieces/site.sha256" ]]; then
      [[ "$(cat "$pieces"/site.part* | sha256sum | cut -d' ' -f1)" == "$(cat "$pieces/site.sha256")" ]] \
        || die "the pieces in $pieces do not join to the packed set (sha256 differs): a piece is missing or cut"
    fi
    mkdir -p "$site"
    # gzip or xz, told by the first piece's magic bytes (pack's COMPRESS)
    case "$(head -c 6 "$pieces/site.part00" | od -An -tx1 | tr -d ' \n')" in
      1f8b*) unsqueeze=(gzip -dc) ;;
      fd377a585a00)
        if command -v xz >/dev/null; then unsqueeze=(xz -dc -T0)
        else unsqueeze=("$PYTHON" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)')
        fi ;;
      *) die "$pieces/site.part00 is neither gzip nor xz: not a piece that pack wrote" ;;
    esac
    cat "$pieces"/site.part* | "${unsqueeze[@]}" | tar -x -C "$site"
    PYTHONPATH="$site/site${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pip install -q --no-index --no-deps \
      --no-build-isolation --no-compile --target "$site/site" --upgrade "$ROOT/retrieval" "$ROOT" \
      "$ROOT/examples/embedded_world"
    [[ "$compile" == 0 ]] || bash "$0" compile "$site"
    echo "offline_site.sh: installed into $site/site; use: eval \"\$(bash $0 env $site)\""
    ;;
  compile)
    [[ $# == 2 ]] || die "usage: compile SITE_DIR"
    site="$(realpath -m "$2")"
    [[ -d "$site/site" ]] || die "$site/site does not exist; run install PIECES_DIR $2 first"
    PYTHON="${PYTHON:-python3}"
    start=$SECONDS
    # A file the node's Python cannot compile (a template, another Python's syntax) stays a source, as before: it
    # makes compileall's status 1 and is counted; any other status is an error.
    log="$(mktemp)"
    rc=0
    "$PYTHON" -m compileall -q -j 0 "$site/site" >"$log" 2>&1 || rc=$?
    failed="$(grep -c '^\*\*\* ' "$log" || true)"
    ((rc == 0 || (rc == 1 && failed > 0))) || { cat "$log" >&2; rm -f "$log"; die "compileall stopped (status $rc)" \
      "in $site/site; its output is above (COMPILE_BYTECODE=0 installs without bytecode)"; }
    rm -f "$log"
    echo "offline_site.sh: compiled $site/site to bytecode with Python" \
      "$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') in $((SECONDS - start)) s$( ((failed == 0)) \
      || echo "; $failed files left as sources (this Python cannot compile them)")"
    ;;
  env)
    [[ $# == 2 ]] || die "usage: env SITE_DIR"
    site="$(realpath -m "$2")"
    printf 'export PYTHONPATH=%q\n' "$ROOT:$ROOT/retrieval:$ROOT/examples/embedded_world:$site/site"
    printf 'export PYTHON=%q\n' "${PYTHON:-python3}"
    ;;
  *) die "usage: pack WHEELHOUSE OUT_DIR | install PIECES_DIR SITE_DIR | compile SITE_DIR | env SITE_DIR" ;;
esac
