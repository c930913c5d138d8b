fn main() -> std::process::ExitCode {
    roce::cli::main()
}
