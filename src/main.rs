//! The `bert-explain` command: the library's command line ([`bert_explain::cli::main`]) on
//! this process's arguments.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(bert_explain::cli::main(std::env::args_os()))
}
