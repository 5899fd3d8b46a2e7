//! The `hpuload` command line: `bench`, `make-dataset` and `preview` (see `hpuload::cli`).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(hpuload::run_cli(std::env::args_os()))
}
