//! Command-line interface: each subcommand is a thin layer over the library crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod dd;
mod dd_json;
mod inspect;
mod inspect_record;
mod inspect_summary;
mod serve;

/// Strata: an SFU that forwards layered video.
#[derive(Debug, Parser)]
#[command(name = "sfu", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dependency Descriptor tools.
    Dd {
        #[command(subcommand)]
        command: dd::DdCommand,
    },
    Inspect(inspect::InspectArgs),
    /// Runs the node: WHIP/WHEP on HTTP, media on one UDP port. Boxed: its many settings
    /// would make every command as large.
    Serve(Box<serve::ServeArgs>),
}

impl Cli {
    pub fn run(self) -> ExitCode {
        match self.command {
            Command::Dd { command } => command.run(),
            Command::Inspect(args) => args.run(),
            Command::Serve(args) => (*args).run(),
        }
    }
}
