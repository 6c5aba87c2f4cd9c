//! The `sfu` command: Strata's tools and, later, the node.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    cli::Cli::parse().run()
}
