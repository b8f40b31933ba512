# shellcheck shell=bash
# Shared by wheelhouse.sh and offline_site.sh (sourced, not run): the wheel platforms of the GPU nodes (x86-64 glibc
# Linux, glibc >= 2.35; the H200 image's Python 3.12.3 is Ubuntu 24.04's, glibc 2.39). One list for both, so every
# wheel the wheelhouse downloads is one that pack installs (llguidance, vLLM's grammar library, is manylinux_2_31).
#
#   source "$ROOT/scripts/gpu/platforms.sh"
#   pip download ... "${NODE_PLATFORM_ARGS[@]}"

NODE_PLATFORM_ARGS=()
for _tag in linux manylinux1 manylinux2010 manylinux2014 manylinux_2_5 manylinux_2_12 manylinux_2_17 manylinux_2_24 \
  manylinux_2_26 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
  NODE_PLATFORM_ARGS+=(--platform "${_tag}_x86_64")
done
unset _tag
