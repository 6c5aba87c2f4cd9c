//! `sfu dd decode`: decode Dependency Descriptors given as hex, one JSON object per line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use serde_json::json;

use super::dd_json::descriptor_json;

#[derive(Debug, Subcommand)]
pub enum DdCommand {
    /// Decode each DD (hex) and print one JSON object per line. A DD that carries a template
    /// structure is the structure for the DDs after it, unless `--structure` pins one.
    Decode {
        /// A DD (hex) that carries the template structure to decode every other DD with.
        #[arg(long, value_name = "HEX")]
        structure: Option<String>,
        /// The descriptors, as hex.
        #[arg(value_name = "HEX", required = true)]
        descriptors: Vec<String>,
    },
}

impl DdCommand {
    pub fn run(self) -> ExitCode {
        let Self::Decode {
            structure,
            descriptors,
        } = self;
        let pinned = match structure.as_deref().map(structure_from_hex).transpose() {
            Ok(pinned) => pinned,
            Err(e) => {
                eprintln!("--structure: {e}");
                return ExitCode::from(2);
            }
        };
        let mut known = pinned.clone();
        let mut failed = false;
        let mut out = std::io::stdout().lock();
        for hex in &descriptors {
            let line = match decode(hex, known.as_ref()) {
                Ok(dd) => {
                    if pinned.is_none() && dd.attached_structure.is_some() {
                        known.clone_from(&dd.attached_structure);
                    }
                    descriptor_json(&dd)
                }
                Err(e) => {
                    failed = true;
                    json!({ "error": e })
                }
            };
            if writeln!(out, "{line}").is_err() {
                return ExitCode::FAILURE;
            }
        }
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

fn decode(
    hex: &str,
    known: Option<&Arc<FrameDependencyStructure>>,
) -> Result<DependencyDescriptor, String> {
    let bytes = hex::decode(hex.trim()).map_err(|e| format!("bad hex: {e}"))?;
    DependencyDescriptor::parse(&bytes, known).map_err(|e| e.to_string())
}

fn structure_from_hex(hex: &str) -> Result<Arc<FrameDependencyStructure>, String> {
    decode(hex, None)?
        .attached_structure
        .ok_or_else(|| "this DD carries no template structure".to_owned())
}
