//! The fake vendor interface (Ironic's `FakeVendorB`): its methods, which check their `bar`
//! argument after the configured `fake_vendor_delay`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tracing::info;

use crate::{
    drivers::{DriverError, VendorInterface, VendorMethod, no_handler},
    node::{JsonObject, Node},
    resource::json::truthy,
};

/// The fake vendor interface (Ironic's `fake`, `FakeVendorB`): each method checks `bar` and
/// says whether it is its word, after `delay`.
pub struct FakeVendor {
    pub(super) delay: Duration,
}

const FAKE_VENDOR_METHODS: &[VendorMethod] = &[
    VendorMethod {
        name: "second_method",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test if the value of bar is kazoo",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "third_method_sync",
        http_methods: &["POST"],
        asynchronous: false,
        description: "Test if the value of bar is meow",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "fourth_method_shared_lock",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test if the value of bar is woof",
        attach: false,
        require_exclusive_lock: false,
    },
    VendorMethod {
        name: "log_passthrough",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test pass-through to wait.",
        attach: false,
        require_exclusive_lock: true,
    },
];

impl FakeVendor {
    /// The word each method that takes `bar` compares it with.
    fn word(method: &str) -> Option<&'static str> {
        match method {
            "second_method" => Some("kazoo"),
            "third_method_sync" => Some("meow"),
            "fourth_method_shared_lock" => Some("woof"),
            _ => None,
        }
    }
}

#[async_trait]
impl VendorInterface for FakeVendor {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn methods(&self) -> &'static [VendorMethod] {
        FAKE_VENDOR_METHODS
    }

    /// `bar` is required and nothing else is taken. Ironic's fake methods fail on another
    /// argument when they run (a TypeError: 500 for the synchronous one, a logged failure after
    /// 202 for the others); here it is refused up front, as a bad parameter.
    fn validate(&self, _node: &Node, method: &str, args: &JsonObject) -> Result<(), DriverError> {
        if Self::word(method).is_none() {
            return Ok(());
        }
        if !args.get("bar").is_some_and(truthy) {
            return Err(DriverError::MissingParameterValue(format!(
                "Parameter 'bar' not passed to method '{method}'."
            )));
        }
        let unexpected: Vec<&str> = args
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "bar")
            .collect();
        if !unexpected.is_empty() {
            return Err(DriverError::InvalidParameterValue(format!(
                "Unexpected arguments for method '{method}': {}",
                unexpected.join(", ")
            )));
        }
        Ok(())
    }

    async fn call(
        &self,
        node: &Node,
        method: &str,
        _http_method: &str,
        args: JsonObject,
    ) -> Result<Value, DriverError> {
        if !FAKE_VENDOR_METHODS.iter().any(|m| m.name == method) {
            return Err(no_handler(method));
        }
        tokio::time::sleep(self.delay).await;
        match Self::word(method) {
            Some(word) => Ok(Value::Bool(
                args.get("bar").and_then(Value::as_str) == Some(word),
            )),
            None => {
                let uuid = &node.uuid;
                info!(node.uuid = %uuid, ?args, "fake vendor method {method} called on node {uuid}");
                Ok(Value::Null)
            }
        }
    }
}
