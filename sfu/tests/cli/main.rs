//! The `sfu` command's tools as a user runs them: `sfu dd decode` and `sfu inspect`.

#[path = "../common/mod.rs"]
mod common;

mod dd;
mod inspect;
