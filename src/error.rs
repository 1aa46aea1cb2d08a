//! The one error enum of Ferrum and its one mapping to HTTP status codes.
//!
//! Variants mirror the exceptions Ironic shows to clients (`ironic/common/exception.py`), with the
//! same message texts where clients may match on them. The enum is serializable so that a conductor's
//! answer crosses RPC intact and the API renders it exactly as the conductor raised it.
//! It must not know about axum (`api::error_body` renders it) nor diesel (`db::errors` converts
//! database failures into it).
#![deny(clippy::wildcard_enum_match_arm)]

use http::StatusCode;
use serde::{Deserialize, Serialize};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Error {
    // 400 family (Ironic's `Invalid`).
    #[error("{0}")]
    InvalidParameterValue(String),
    #[error("{0}")]
    MissingParameterValue(String),
    #[error(
        "The requested action \"{action}\" can not be performed on node \"{node}\" while it is in state \"{state}\"."
    )]
    InvalidStateRequested {
        action: String,
        node: String,
        state: String,
    },
    #[error(
        "The {op} operation can't be performed on node {node} because it's in maintenance mode."
    )]
    NodeInMaintenance { op: String, node: String },
    #[error("The {op} operation can't be performed on node {node} because it is retired.")]
    NodeIsRetired { op: String, node: String },
    /// 401 for a heartbeat whose agent token is wrong or missing. Ironic answers 400
    /// (InvalidParameterValue); a refused credential is a 401, which agents retry alike.
    #[error("Invalid or missing agent token received.")]
    InvalidAgentToken,
    #[error("Couldn't apply patch '{patch}'. Reason: {reason}")]
    PatchError { patch: String, reason: String },
    #[error("Expected a conductor group but received {0}.")]
    InvalidConductorGroup(String),
    /// The node's interface of this kind is a `no-*` one.
    #[error("Driver {driver} does not support {extension} (disabled or not implemented).")]
    UnsupportedDriverExtension { driver: String, extension: String },
    /// No conductor offers the requested driver: a request that can never succeed as sent.
    #[error("No valid host was found. Reason: {0}")]
    NoValidHost(String),

    // 403.
    #[error("Node {node} is protected and cannot be undeployed, rebuilt or deleted")]
    NodeProtected { node: String },
    /// Ironic's OperationNotPermitted: a request that combines what may not be combined.
    #[error("Not permitted.")]
    OperationNotPermitted,
    /// Ironic's HTTPForbidden: the policy refuses the caller `resource` (a rule's name).
    #[error("Access was denied to the following resource: {resource}")]
    AccessDenied { resource: String },

    // 404 family.
    #[error("Node {node} could not be found.")]
    NodeNotFound { node: String },
    #[error("Node {node} doesn't have a trait '{name}'")]
    NodeTraitNotFound { node: String, name: String },
    #[error("Node {node} doesn't have a BIOS setting '{name}'")]
    BiosSettingNotFound { node: String, name: String },
    #[error("Conductor {0} could not be found.")]
    ConductorNotFound(String),
    #[error("{0}")]
    NotFound(String),

    // 405 and 406: raised by the API before a handler runs.
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    NotAcceptable(String),

    // 409 family (Ironic's `Conflict`).
    #[error(
        "Node {node} is locked by host {host}, please retry after the current operation is completed."
    )]
    NodeLocked { node: String, host: String },
    /// A state that forbids the operation, with a message that says which.
    #[error("{0}")]
    InvalidState(String),
    #[error("Node {node} is associated with instance {instance}.")]
    NodeAssociated { node: String, instance: String },
    #[error("{0}")]
    Conflict(String),
    /// A power-off refused because the node has `disable_power_off` (API 1.95).
    #[error("Failed to set node power state to {target}.")]
    PowerStateFailure { target: String },

    // 415 and 413.
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    PayloadTooLarge(String),

    // 503 family (Ironic's `TemporaryFailure`).
    #[error("Requested action cannot be performed due to lack of free conductor workers.")]
    NoFreeConductorWorker,
    /// No conductor can take the request now (none online, or the chosen one too slow).
    #[error("{0}")]
    TemporaryFailure(String),
    /// The conductor the hash ring chose has no queue: it died or stopped since the ring was read.
    #[error("Conductor {host} is not reachable; please retry.")]
    ConductorUnreachable { host: String },
    /// The conductor died or stopped after it was sent the request and before it replied.
    #[error(
        "Conductor {host} went away before it answered; the request may or may not have been applied. Retrying it with the same X-OpenStack-Request-Id header applies it at most once."
    )]
    ConductorLost { host: String },
    #[error("Database unavailable: {0}")]
    DatabaseUnavailable(String),
    /// The database cannot store changes now (out of space, read-only storage, a failing disk);
    /// the cause in words. Nothing was changed, reads still work, and writes resume once the
    /// cause is gone.
    #[error(
        "The change could not be stored: {0}. Reads still work; please retry once that is resolved."
    )]
    DatabaseCannotWrite(String),
    /// The conductor's deadline (when the caller stops waiting) passed before the change could
    /// be applied, e.g. while another client held the node's row: the change was abandoned.
    #[error(
        "The change of node {node} did not finish within the request's time limit; nothing was changed. Please retry."
    )]
    DeadlineExceeded { node: String },

    /// 500, as Ironic's (an `IronicException` without a code): a portgroup whose member ports
    /// are on different physical networks, found when a port joins it. Ferrum's checks keep
    /// this from arising; data written before them may still show it.
    #[error(
        "Port group {portgroup} has member ports with inconsistent physical networks ({physical_networks}). All ports in a port group must have the same physical network."
    )]
    PortgroupPhysnetInconsistent {
        portgroup: String,
        physical_networks: String,
    },

    // 500: a fault of ours. The message is logged, never shown to the client.
    #[error("{0}")]
    Internal(String),

    /// 401 of `auth_strategy = http_basic`: no credentials, or wrong ones. Raised before
    /// routing by Ironic's basic-auth middleware, which renders it (`api::error_body`) in its
    /// own envelope with `WWW-Authenticate`.
    #[error("{0}")]
    Unauthorized(String),
    /// 400 of the same middleware: an `Authorization` header it cannot read.
    #[error("{0}")]
    BadAuthorization(String),
    /// 406 for a microversion header that is malformed or outside the supported range, raised
    /// before routing; Ironic's web framework renders it (`api::error_body`), not its handlers.
    #[error("{0}")]
    VersionNotAcceptable(String),
    /// 500: the hardware failed a call the client waited for; the reason is shown, as Ironic
    /// shows it.
    #[error("Runtime driver {driver} failure. Reason: {reason}.")]
    DriverOperationError { driver: String, reason: String },
}

impl Error {
    /// The HTTP status code of the error, as Ironic gives it.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::InvalidParameterValue(_)
            | Error::MissingParameterValue(_)
            | Error::InvalidStateRequested { .. }
            | Error::NodeInMaintenance { .. }
            | Error::NodeIsRetired { .. }
            | Error::PatchError { .. }
            | Error::InvalidConductorGroup(_)
            | Error::UnsupportedDriverExtension { .. }
            | Error::NoValidHost(_)
            | Error::BadAuthorization(_) => StatusCode::BAD_REQUEST,
            Error::InvalidAgentToken | Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::NodeProtected { .. }
            | Error::OperationNotPermitted
            | Error::AccessDenied { .. } => StatusCode::FORBIDDEN,
            Error::NodeNotFound { .. }
            | Error::NodeTraitNotFound { .. }
            | Error::BiosSettingNotFound { .. }
            | Error::ConductorNotFound(_)
            | Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::NotAcceptable(_) | Error::VersionNotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Error::NodeLocked { .. }
            | Error::InvalidState(_)
            | Error::NodeAssociated { .. }
            | Error::Conflict(_)
            | Error::PowerStateFailure { .. } => StatusCode::CONFLICT,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::NoFreeConductorWorker
            | Error::TemporaryFailure(_)
            | Error::ConductorUnreachable { .. }
            | Error::ConductorLost { .. }
            | Error::DatabaseUnavailable(_)
            | Error::DatabaseCannotWrite(_)
            | Error::DeadlineExceeded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Internal(_)
            | Error::DriverOperationError { .. }
            | Error::PortgroupPhysnetInconsistent { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the client may read. A 500 hides its cause (which is logged instead).
    pub fn client_message(&self) -> String {
        if let Error::Internal(_) = self {
            return "An internal error occurred; it has been logged.".to_owned();
        }
        // Hosts, users and the driver's own words stay in the log.
        if let Error::DatabaseUnavailable(_) = self {
            return "The database is unavailable; please retry.".to_owned();
        }
        self.to_string()
    }

    /// Whether the database could not take the request now, for a reason that passes (it
    /// did not answer, or cannot store anything): a held node's write waits for it and tries
    /// again rather than give the node up.
    pub fn is_database_away(&self) -> bool {
        matches!(
            self,
            Error::DatabaseUnavailable(_) | Error::DatabaseCannotWrite(_)
        )
    }

    pub fn node_not_found(node: impl Into<String>) -> Self {
        Error::NodeNotFound { node: node.into() }
    }

    /// Ironic's DriverNotFound (404): no conductor offers the driver.
    pub fn driver_not_found(driver: &str) -> Self {
        Error::NotFound(format!(
            "Could not find the following driver(s) or hardware type(s): {driver}."
        ))
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Error::Internal(cause.to_string())
    }
}

/// The text a panic carried, if it was a string.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_ironic() {
        let cases = [
            (
                Error::InvalidParameterValue("x".into()),
                StatusCode::BAD_REQUEST,
            ),
            (
                Error::InvalidStateRequested {
                    action: "provide".into(),
                    node: "n".into(),
                    state: "deploy failed".into(),
                },
                StatusCode::BAD_REQUEST,
            ),
            (Error::node_not_found("n"), StatusCode::NOT_FOUND),
            (
                Error::NodeLocked {
                    node: "n".into(),
                    host: "h".into(),
                },
                StatusCode::CONFLICT,
            ),
            (Error::InvalidState("x".into()), StatusCode::CONFLICT),
            (
                Error::NoFreeConductorWorker,
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                Error::TemporaryFailure("x".into()),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (Error::NotAcceptable("x".into()), StatusCode::NOT_ACCEPTABLE),
            (
                Error::VersionNotAcceptable("x".into()),
                StatusCode::NOT_ACCEPTABLE,
            ),
            (
                Error::MethodNotAllowed("x".into()),
                StatusCode::METHOD_NOT_ALLOWED,
            ),
            (Error::internal("boom"), StatusCode::INTERNAL_SERVER_ERROR),
            (
                Error::NodeProtected { node: "n".into() },
                StatusCode::FORBIDDEN,
            ),
            (
                Error::AccessDenied {
                    resource: "r".into(),
                },
                StatusCode::FORBIDDEN,
            ),
            (
                Error::NodeTraitNotFound {
                    node: "n".into(),
                    name: "CUSTOM_X".into(),
                },
                StatusCode::NOT_FOUND,
            ),
            (
                Error::InvalidConductorGroup("a b".into()),
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (err, status) in cases {
            assert_eq!(err.status(), status, "{err:?}");
        }
    }

    #[test]
    fn messages_match_ironic_templates() {
        let locked = Error::NodeLocked {
            node: "abc".into(),
            host: "c1".into(),
        };
        assert_eq!(
            locked.to_string(),
            "Node abc is locked by host c1, please retry after the current operation is completed."
        );
        let invalid = Error::InvalidStateRequested {
            action: "provide".into(),
            node: "abc".into(),
            state: "deploy failed".into(),
        };
        assert_eq!(
            invalid.to_string(),
            "The requested action \"provide\" can not be performed on node \"abc\" while it is in state \"deploy failed\"."
        );
    }

    #[test]
    fn internal_errors_hide_their_cause() {
        let e = Error::internal("password=hunter2 in a stack");
        assert!(!e.client_message().contains("hunter2"));
        assert_eq!(
            Error::NoFreeConductorWorker.client_message(),
            "Requested action cannot be performed due to lack of free conductor workers."
        );
    }

    #[test]
    fn crosses_rpc_intact() {
        let e = Error::NodeLocked {
            node: "n".into(),
            host: "h".into(),
        };
        let bytes = rmp_serde::to_vec(&e).unwrap();
        let back: Error = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, e);
    }
}
