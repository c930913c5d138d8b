//! `roce`: RoCEv2 test harness and packet analyzer. The binary is a thin shell over
//! this library so that tests reach every command.
pub mod cli;
pub mod craft;
pub mod decode;
pub mod flows;
pub mod live;
pub mod output;
pub mod source;
pub mod lab;
pub mod scenario;
pub mod agent;
pub mod run;
pub mod verbs;
