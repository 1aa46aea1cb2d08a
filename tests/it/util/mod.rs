//! Test support: the real services (MariaDB/MySQL and RabbitMQ on loopback by default), a fresh
//! database per test, and a cluster of real `ferrum` processes driven over HTTP.

pub mod cluster;
pub mod services;

pub use cluster::{Api, Cluster, ClusterOptions};
pub use services::{TestDb, amqp_url};
