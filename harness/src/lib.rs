//! `roce`: RoCEv2 test harness and packet analyzer. The binary is a thin shell over
//! this library so that tests reach every command.
pub mod cli;
pub mod craft;
pub mod decode;
pub mod flows;
pub mod live;
pub mod output;
pub mod probe;
pub mod profile;
pub mod source;
pub mod suite;
pub mod scenario;
pub mod agent;
pub mod run;
pub mod html;
pub mod report;
pub mod verbs;
