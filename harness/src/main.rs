//! `roce`: the binary. Everything is in the library, where the tests reach it.
fn main() -> std::process::ExitCode {
    roce::cli::main()
}
