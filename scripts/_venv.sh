# Sourced by scripts/demo and scripts/test: make (once) and activate the project's .venv.
# $1 is the pip extra to install ("" or "dev").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON_BIN="${PYTHON_BIN:-python3}"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  "$PYTHON_BIN" -m venv "$ROOT/.venv"
fi
# shellcheck disable=SC1091
. "$ROOT/.venv/bin/activate"
stamp="$ROOT/.venv/.installed-${1:-base}"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  python -m pip install -q --upgrade pip >&2
  if [ -n "${1:-}" ]; then
    python -m pip install -q -e "$ROOT[$1]" >&2
  else
    python -m pip install -q -e "$ROOT" >&2
  fi
  touch "$stamp"
fi
# Byte-compile the project (only what changed since the last time): every `till` process reads
# the cache instead of compiling the package again, whatever PYTHONDONTWRITEBYTECODE says (it
# stops only the interpreter's own writes, not compileall's).
python -m compileall -q -j 0 "$ROOT/src" >/dev/null
