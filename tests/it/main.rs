//! The integration suite: real `ferrum` processes against real MariaDB/MySQL and RabbitMQ, and
//! the service in process (`inprocess`) where a test is about logic, not processes.
//! One binary (like crates.io's), so the build links once and tests run in parallel.

#![expect(
    unreachable_pub,
    reason = "the support modules are private to this test binary"
)]

mod util;

mod agent_deploy;
mod allocations;
mod amqp;
mod amqp_reconnect;
mod api;
mod api_1_10x;
mod api_1_7x;
mod api_1_8x;
mod auth;
mod bios_firmware;
mod clients;
mod configdrive;
mod db;
mod deadlines;
mod deploy;
mod deploy_templates;
mod drivers;
mod durability;
mod embedded;
mod failures;
mod fault_schedule;
mod faults;
mod galera;
mod indicators;
mod inprocess;
mod inspection;
mod inspection_rules;
mod interfaces_config;
mod ipmi;
mod keystone;
mod lab;
mod layers;
mod limits;
mod locking;
mod management;
mod node_children;
mod node_features;
mod node_fields_1_6x;
mod node_history;
mod node_inventory;
mod node_shards;
mod notifications;
mod ops;
mod ports;
mod ports_1_8x;
mod ports_1_9x;
mod power_sync;
mod raid;
mod ramdisk;
mod redfish;
mod redfish_deploy;
mod resilience;
mod routes;
mod runbook_traits;
mod runbooks;
mod servicing;
mod setup;
mod tls;
mod vmedia;
mod volume;
mod watch;
mod wedged;
