//! Per-subscriber layer selection: decides, for each packet of a published stream, whether a
//! subscriber gets it and with which rewritten Dependency Descriptor.
//!
//! The selectors land with the layer-selection issue; the crate exists now so the workspace
//! layout is fixed from the start.
//!
//! [`scalability`]: generated Dependency Descriptor streams of the standard scalability modes.

pub mod scalability;
