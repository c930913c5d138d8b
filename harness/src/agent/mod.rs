//! The endpoint agent (`roce agent`): executes its part of a scenario with real verbs.
pub mod proto;
