// Empty on purpose: this build script exists only so that Cargo.toml's
// [build-dependencies] can line up the features of the proc-macros' `syn` with the Python
// wheel's build, which then reuses this crate's release artifacts (see Cargo.toml).
fn main() {}
