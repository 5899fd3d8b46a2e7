//! A new op cannot be half-added: in a scratch copy of the crate, `scripts/new-op-check.sh`
//! adds a pipeline op and a resolved pixel op and checks that the compiler names every place
//! that must handle them (the op's `OpSpec`: kind, check, draw; each of `PixelOp`'s
//! exhaustive properties and `apply`). Ignored: it runs `cargo check` on the copy (a minute or
//! two); run it with `cargo test --test new_op -- --ignored`.

#[test]
#[ignore = "runs cargo check on a scratch copy of the crate"]
fn the_compiler_names_every_place_a_new_op_must_be_handled() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/new-op-check.sh");
    let run = std::process::Command::new(script).output().unwrap();
    assert!(
        run.status.success(),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}
