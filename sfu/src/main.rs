//! The `sfu` command: Strata's tools and, later, the node.

use std::process::ExitCode;

use clap::Parser;

mod cli;

/// Each viewer's state is a few separate allocations (its subscriptions, send histories,
/// SRTP session), touched on every packet it is sent: with hundreds of viewers on 4 KiB
/// pages that is more pages than the TLB holds. This allocator serves them from huge pages.
/// The measurement is in BENCHMARKS.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::Cli::parse().run()
}
