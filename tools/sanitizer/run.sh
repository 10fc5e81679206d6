#!/usr/bin/env bash
# Runs a command (Python, usually) with the AddressSanitizer runtime preloaded,
# for the stages `make test-sanitized` builds with ACCINTE_SANITIZE=address:
#
#     tools/sanitizer/run.sh python -m pytest tests/...
#
# Neither the interpreter nor PyTorch is instrumented, so the ASan runtime is
# not pulled in by the executable; it must be the first library of the
# process, hence LD_PRELOAD. Children (the tests' subprocesses) inherit it.
set -euo pipefail
CXX=${CXX:-g++}
# LITERALINCLUDE START: SANITIZER_PRELOAD
asan_runtime=$("$CXX" -print-file-name=libasan.so)
# NB: the C++ runtime is preloaded as well. ASan intercepts __cxa_throw, and
# finds the real one only in libraries loaded when it starts; the interpreter
# does not link libstdc++, so without it the first C++ exception (any
# TORCH_CHECK) would abort in ASan's interceptor.
cxx_runtime=$("$CXX" -print-file-name=libstdc++.so.6)
for library in "$asan_runtime" "$cxx_runtime"; do
  if [ ! -e "$library" ]; then
    echo "sanitizer/run.sh: $library not found beside $CXX" >&2
    exit 1
  fi
done

asan_options=(
  # NB: no leak check in these runs. CPython and PyTorch keep objects alive
  # until the process ends by design (interned strings, operator registry,
  # thread pools), so LeakSanitizer would report the interpreter, not us.
  # The emulator's own allocations are leak-checked by its gtests under ASan
  # (`make test-emulator-sanitized`), where nothing else allocates.
  detect_leaks=0
)
ubsan_options=(
  print_stacktrace=1
  halt_on_error=1
)
join() { local IFS=:; echo "$*"; }
export LD_PRELOAD="$asan_runtime:$cxx_runtime${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="$(join "${asan_options[@]}")${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="$(join "${ubsan_options[@]}")${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# LITERALINCLUDE END: SANITIZER_PRELOAD
exec "$@"
