//! Ferrum: a bare-metal provisioning service that speaks OpenStack Ironic's REST API v1.
//!
//! Modules in reading order: the state machine and errors everything shares; the database; the
//! RPC layer; the drivers; the conductor that runs them; the API in front; process wiring.

pub mod allocation;
pub mod api;
pub mod broker;
pub mod chassis;
pub mod conductor;
pub mod config;
pub mod configdrive;
pub mod db;
pub mod deploy_template;
pub mod drivers;
pub mod error;
pub mod host_list;
pub mod http_server;
pub mod inspection_rule;
pub mod metrics;
pub mod node;
pub mod notifications;
pub mod patch;
pub mod ports;
pub mod resource;
pub mod rpc;
pub mod runbook;
pub mod schema;
pub mod service;
pub mod states;
pub mod steps;
pub mod telemetry;
pub mod volume;
