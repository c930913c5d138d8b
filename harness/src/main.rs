//! `roce`: the binary. Everything is in the library, where the tests reach it.
//!
//! Owns: `main`. Imports: [`roce::cli::main`].
fn main() -> std::process::ExitCode {
    roce::cli::main()
}
