#!/usr/bin/env bash
# The wheel users get: built as released (release profile, abi3, manylinux2014 through zig), then
# installed into a clean virtual environment with nothing but its declared dependencies, and used;
# then the [spark] extra. Needs .venv (scripts/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
out=target/wheel-smoke
rm -rf "$out"
mkdir -p "$out"
echo "  building the release wheel (manylinux2014, abi3)..."
maturin build --release --zig --compatibility manylinux2014 --out "$out/dist" --quiet 2>&1 | grep -v "^$" | sed 's/^/    /' || true
whl=$(ls "$out"/dist/pulsarkit-*.whl)
echo "  $(basename "$whl")"
auditwheel show "$whl" | tr '\n' ' ' | grep -q '"manylinux_2_17_x86_64"' \
  || { echo "wheel is not manylinux_2_17: $(auditwheel show "$whl")"; exit 1; }
if unzip -l "$whl" | grep -E "pulsarkit/(testing/(fake_broker|connection|state)\.py|demo\.py)"; then
  echo "the fake broker or the demo ended up in the wheel"; exit 1
fi
base=$(python -c 'import sys; print(sys.base_prefix)')/bin/python3
"$base" -m venv "$out/venv"
v="$out/venv/bin"
echo "  installing it into a clean venv..."
"$v/pip" install --quiet --disable-pip-version-check "$whl"
"$v/python" - <<'PY'
import importlib.metadata as md
import tempfile, os
import pulsarkit as pk
from pulsarkit import analysis, bookkeeper, broker, managed_ledger, metadata  # noqa: F401
# only the declared dependencies are there
installed = {d.metadata["Name"].lower() for d in md.distributions()}
assert not {"pyspark", "pandas", "pytest"} & installed, installed
with tempfile.TemporaryDirectory() as d:
    with pk.Store.open(os.path.join(d, "data")) as s:
        ml = s.managed_ledger("public/default/persistent/t")
        pos = ml.add_entry(pk.encode_entry(pk.message_metadata("p", 0, 1), b"hello"))
    with pk.open_data_dir(os.path.join(d, "data")) as dd:
        assert [t.name for t in dd.topics()] == ["persistent://public/default/t"], dd.topics()
from pulsarkit.testing.compaction import CompactedTopicOracle
with CompactedTopicOracle() as t:
    t.send_batch([("a", b"1"), ("b", b"2"), ("a", b"")])
    t.compact()
    assert [m.key for m in t.expected_messages()] == ["b"], t.expected_messages()
print("  import, a write/read round trip and the compacted-topic oracle: ok", pk.__version__)
PY
"$v/pulsarkit" --version
"$v/python" -m pulsarkit --help > /dev/null
echo "  installing the [spark] extra..."
"$v/pip" install --quiet --disable-pip-version-check "$whl[spark]"
"$v/python" -c "import pyspark, pulsarkit.spark; print('  [spark] extra: pyspark', pyspark.__version__)"
rm -rf "$out/venv"
