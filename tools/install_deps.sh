#!/usr/bin/env bash
# Installs what the build, the tests and the docs need, and nothing that is
# already there. Called by `make deps` (and so by `make demo` / `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# --- Debian packages -------------------------------------------------------
# NB: chromium is the browser of `make docs-browser-test` (tools/browser_test.py).
packages=(g++ cmake ninja-build ccache doxygen graphviz chromium libgtest-dev clang-format)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "install_deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python packages -------------------------------------------------------
# NB: torch is pinned here and only here; asking pip for an unpinned torch
# would pull a multi-GB CUDA build.
want_torch=2.13.0
have_torch=$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have_torch" != "$want_torch" ]; then
  echo "install_deps: installing torch==$want_torch (found '${have_torch:-none}')"
  "$PYTHON" -m pip install -q "torch==$want_torch"
fi
# pip resolves against the installed torch and installs only what is missing.
"$PYTHON" -m pip install -q --disable-pip-version-check \
  -r requirements/build.txt -r requirements/test.txt -r requirements/docs.txt
