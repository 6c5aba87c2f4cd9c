//! Selection on the Dependency Descriptor: decode targets, chains and switch points.

mod chains;
mod selector;
mod targets;

pub use selector::{DdPacket, DdSelector, SelectError, MAX_DD_SIZE};
