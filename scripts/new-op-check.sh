#!/usr/bin/env bash
# What the compiler asks of whoever adds an op: in a scratch copy of the crate, add one
# pipeline op (`Op::Dummy`, a spec struct without an `OpSpec` impl) and one resolved pixel op
# (`PixelOp::Dummy`), run `cargo check`, and list every place the compiler says must handle
# them. Exits 1 unless each of the expected places is named, so the registry's promise ("a new
# op cannot be half-added") is checked, not assumed. Run by the ignored test
# `tests/new_op.rs`; takes a minute or two (a `cargo check` of the library).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$root/Cargo.toml" "$root/Cargo.lock" "$root/src" "$root/decoders" "$root/pipelines" \
    "$root/benches" "$root/examples" "$scratch/"
[ -d "$root/python" ] && mkdir -p "$scratch/python" && cp -r "$root/python/Cargo.toml" "$root/python/src" "$scratch/python/"
[ -d "$root/fuzz" ] && cp -r "$root/fuzz" "$scratch/"
mkdir -p "$scratch/tests"
python3 - "$scratch" <<'PY'
import sys
root = sys.argv[1]
op = f"{root}/src/augment/op.rs"
s = open(op).read()
s = s.replace('    RandomErasing(RandomErasing) = "random_erasing",\n',
              '    RandomErasing(RandomErasing) = "random_erasing",\n    /// A new op.\n    Dummy(Dummy) = "dummy",\n', 1)
s += "\n/// A new op whose author has not said what it is yet.\n#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]\npub struct Dummy {}\n"
open(op, "w").write(s)
px = f"{root}/src/augment/pixel.rs"
s = open(px).read()
s = s.replace("pub enum PixelOp {\n", "pub enum PixelOp {\n    /// A new resolved op.\n    Dummy,\n", 1)
open(px, "w").write(s)
PY
cd "$scratch"
out=$(CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/new-op-check}" cargo check -p hpuload --lib --message-format short 2>&1 || true)
echo "$out" | grep -E "^src/.*error" || true
status=0
for expected in \
    "src/augment/op.rs:.*OpSpec.* is not satisfied|src/augment/op.rs:.*not implemented for .Dummy" \
    "src/augment/pixel.rs:.*PixelOp::Dummy. not covered" \
    "src/augment/run.rs:.*PixelOp::Dummy. not covered" ; do
    if ! echo "$out" | grep -Eq "$expected"; then
        echo "not named by the compiler: $expected"
        status=1
    fi
done
n=$(echo "$out" | grep -Ec "src/augment/(pixel|run).rs:.*PixelOp::Dummy. not covered" || true)
echo "PixelOp::Dummy: $n exhaustive matches to extend"
# pixel.rs: commutes_with_hflip, reach, engine_runs_before_geometry; run.rs: apply, adjustment.
[ "$n" -ge 5 ] || { echo "expected at least 5 matches over PixelOp"; status=1; }
exit $status
