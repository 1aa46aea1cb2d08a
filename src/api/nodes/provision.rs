//! PUT /v1/nodes/{id}/states/provision: the verb's version and arguments are checked here; the
//! conductor judges it against the node's state under the lock.

use axum::{extract::State, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{accepted, call, find, require_version};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
    },
    error::{Error, Result},
    node::Verb,
    resource,
    rpc::RpcRequest,
    runbook,
    states::ProvisionState,
    steps::{self, DeployStep},
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionBody {
    target: String,
    configdrive: Option<Value>,
    clean_steps: Option<Value>,
    deploy_steps: Option<Value>,
    /// The steps a `service` runs (1.87).
    service_steps: Option<Value>,
    disable_ramdisk: Option<Value>,
    rescue_password: Option<String>,
    /// A runbook (1.92) whose steps a clean or a service runs instead of its own.
    runbook: Option<String>,
}

pub async fn set_provision_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<ProvisionBody>,
) -> Result<Response> {
    let target = body.target.as_str();
    let Some(verb) = Verb::parse(target) else {
        return Err(Error::InvalidParameterValue(format!(
            "\"{target}\" is not a valid provision state target."
        )));
    };
    require_version(version, verb.since(), &format!("The \"{target}\" target"))?;
    if body.configdrive.is_some() && !matches!(verb, Verb::Active | Verb::Deploy | Verb::Rebuild) {
        return Err(Error::InvalidParameterValue(
            "configdrive can only be specified when deploying or rebuilding a node.".to_owned(),
        ));
    }
    let disable_ramdisk = read_disable_ramdisk(version, verb, body.disable_ramdisk)?;
    if body.runbook.is_some() {
        require_version(version, runbook::SINCE, "runbook")?;
        if !matches!(verb, Verb::Clean | Verb::Service) {
            return Err(Error::InvalidParameterValue(
                "\"runbooks\" is only valid when setting target provision state to any of ['clean', 'service']".to_owned(),
            ));
        }
    }
    if body.clean_steps.is_some() && verb != Verb::Clean {
        return Err(Error::InvalidParameterValue(
            "\"clean_steps\" is only valid when setting target provision state to clean".to_owned(),
        ));
    }
    if body.service_steps.is_some() && verb != Verb::Service {
        return Err(Error::InvalidParameterValue(
            "\"service_steps\" is only valid when setting target provision state to service"
                .to_owned(),
        ));
    }
    // The steps a clean or a service names itself; only those two verbs may get this far with
    // any (checked just above).
    let (what, given) = if verb == Verb::Service {
        ("service_steps", body.service_steps)
    } else {
        ("clean_steps", body.clean_steps)
    };
    let given = read_run_steps(what, given)?;
    if matches!(verb, Verb::Clean | Verb::Service) && given.is_none() && body.runbook.is_none() {
        return Err(Error::InvalidParameterValue(format!(
            "\"{what}\" is required when setting target provision state to {verb}"
        )));
    }
    let deploy_steps = read_deploy_steps(version, verb, body.deploy_steps)?;
    if body.rescue_password.is_some() {
        require_version(version, 38, "rescue_password")?;
        if verb != Verb::Rescue {
            return Err(Error::InvalidParameterValue(
                "\"rescue_password\" is only valid when setting target provision state to rescue"
                    .to_owned(),
            ));
        }
    }
    if body.configdrive.is_some() && verb == Verb::Rebuild {
        require_version(version, 35, "configdrive on rebuild")?;
    }
    if let Some(configdrive) = &body.configdrive {
        check_configdrive(version, configdrive)?;
    }
    let node = find(&state, &ident, version).await?;
    // Aborting an inspection that waits came with 1.41, aborting a deploy that waits for its
    // agent with 1.110 (Ironic's `_do_provision_action` answers 406 below them).
    if verb == Verb::Abort {
        match node.provision_state {
            ProvisionState::InspectWait => require_version(version, 41, "Aborting inspect wait")?,
            ProvisionState::DeployWait => require_version(version, 110, "Aborting wait call-back")?,
            _ => {}
        }
    }
    let steps = match &body.runbook {
        Some(ident) => {
            let runbook = crate::db::runbooks::get(&state.db, ident).await?;
            runbook::check_usable(&runbook, &node.uuid, &node.traits.0, version.0)?;
            if given.is_some() {
                return Err(Error::InvalidParameterValue(format!(
                    "Please provide either \"{what}\" or a runbook, but not both."
                )));
            }
            runbook::clean_steps(&runbook)
        }
        None => given.unwrap_or_default(),
    };
    let node = Box::new(node);
    let request = match verb {
        Verb::Active | Verb::Deploy => RpcRequest::DoNodeDeploy {
            node,
            rebuild: false,
            configdrive: body.configdrive,
            deploy_steps,
        },
        Verb::Rebuild => RpcRequest::DoNodeDeploy {
            node,
            rebuild: true,
            configdrive: body.configdrive,
            deploy_steps,
        },
        Verb::Deleted | Verb::Undeploy => RpcRequest::DoNodeTearDown { node },
        Verb::Rescue => {
            let password = body.rescue_password.unwrap_or_default();
            if password.trim().is_empty() {
                return Err(Error::InvalidParameterValue(
                    "A non-empty \"rescue_password\" is required when setting target provision state to rescue".to_owned(),
                ));
            }
            RpcRequest::DoNodeRescue {
                node,
                rescue_password: password,
            }
        }
        Verb::Unrescue => RpcRequest::DoNodeUnrescue { node },
        Verb::Clean => RpcRequest::DoNodeClean {
            node,
            clean_steps: steps,
            disable_ramdisk,
        },
        Verb::Service => RpcRequest::DoNodeService {
            node,
            service_steps: steps,
            disable_ramdisk,
        },
        Verb::Manage | Verb::Provide | Verb::Inspect | Verb::Abort | Verb::Adopt | Verb::Unhold => {
            RpcRequest::DoProvisioningAction { node, action: verb }
        }
    };
    call(&state, &request_id, request).await?;
    Ok(accepted(&base, &ident))
}

/// `disable_ramdisk` (Ironic's `check_allow_disable_ramdisk`): with manual cleaning, 406 below
/// 1.70; with servicing, 406 below 1.108; a boolean as Ironic reads one.
fn read_disable_ramdisk(version: ApiVersion, verb: Verb, value: Option<Value>) -> Result<bool> {
    let Some(disable) = resource::boolean("disable_ramdisk", value.unwrap_or_default())? else {
        return Ok(false);
    };
    if !matches!(verb, Verb::Clean | Verb::Service) {
        return Err(Error::InvalidParameterValue(
            "disable_ramdisk is supported only with manual cleaning or servicing".to_owned(),
        ));
    }
    let since = if verb == Verb::Service { 108 } else { 70 };
    if !version.at_least(since) {
        return Err(Error::NotAcceptable(
            "disable_ramdisk is not acceptable in this API version".to_owned(),
        ));
    }
    Ok(disable)
}

/// The steps a `clean` or `service` request names itself (`clean_steps`, `service_steps`),
/// checked as Ironic's `_STEPS_SCHEMA` checks them; None when it names none (null or an empty
/// list, as Ironic reads them), so that a runbook may give them.
fn read_run_steps(what: &'static str, given: Option<Value>) -> Result<Option<Vec<Value>>> {
    match given {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(v) => steps::read_run_steps(what, v).map(Some),
    }
}

/// `deploy_steps` (1.69, Ironic's `check_allow_deploy_steps` and `_check_deploy_steps`): null or
/// an empty list ask for nothing at any version; otherwise 406 below 1.69, 400 with a verb other
/// than a deploy, and each step checked as Ironic's schema checks it. Ironic refuses them with
/// the 1.73 `deploy` verb (it lists only `active` and `rebuild`); Ferrum takes `deploy` as the
/// alias of `active` it is.
fn read_deploy_steps(
    version: ApiVersion,
    verb: Verb,
    steps: Option<Value>,
) -> Result<Vec<DeployStep>> {
    match &steps {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) if items.is_empty() => return Ok(Vec::new()),
        Some(_) => {}
    }
    if !version.at_least(69) {
        return Err(Error::NotAcceptable(
            "Request not acceptable. The minimal required API version should be 1.69".to_owned(),
        ));
    }
    if !matches!(verb, Verb::Active | Verb::Deploy | Verb::Rebuild) {
        return Err(Error::InvalidParameterValue(
            "\"deploy_steps\" is only valid when setting target provision state to active or rebuild"
                .to_owned(),
        ));
    }
    steps::read_user_steps(steps.unwrap_or_default())
}

/// The keys of a configdrive given as an object (1.56; `vendor_data` 1.59), from which the
/// conductor builds the image (Ironic's `_CONFIG_DRIVE_SCHEMA`, `check_allow_configdrive` in
/// `api/controllers/v1/utils.py`).
const CONFIGDRIVE_KEYS: &[&str] = &["meta_data", "network_data", "user_data", "vendor_data"];

/// A configdrive is an image (gzipped, base64), a URL to one, or from 1.56 an object to build
/// one from; anything else is a 400, as in Ironic.
fn check_configdrive(version: ApiVersion, configdrive: &Value) -> Result<()> {
    let invalid =
        |why: &str| Error::InvalidParameterValue(format!("Invalid configdrive format: {why}"));
    match configdrive {
        Value::Null => Ok(()),
        Value::String(s) => {
            let base64 = |c: char| c.is_ascii_alphanumeric() || "+/=\n\r\t ".contains(c);
            if s.contains("://") || s.chars().all(base64) {
                Ok(())
            } else {
                Err(invalid(
                    "it is neither a JSON, nor a URL, nor a base64 string",
                ))
            }
        }
        Value::Object(parts) => {
            if !version.at_least(56) {
                return Err(Error::InvalidParameterValue(
                    "Providing a JSON object for configdrive is only supported starting with API version 1.56".to_owned(),
                ));
            }
            for (key, value) in parts {
                if !CONFIGDRIVE_KEYS.contains(&key.as_str()) {
                    return Err(invalid(&format!(
                        "unexpected key '{key}'; a configdrive object has {}",
                        CONFIGDRIVE_KEYS.join(", ")
                    )));
                }
                let fits = match key.as_str() {
                    "user_data" => !value.is_number() && !value.is_boolean(),
                    _ => value.is_object(),
                };
                if !fits {
                    return Err(invalid(&format!("{key} cannot be {value}")));
                }
            }
            if parts.contains_key("vendor_data") && !version.at_least(59) {
                return Err(Error::InvalidParameterValue(
                    "Providing vendor_data in configdrive is only supported starting with API version 1.59".to_owned(),
                ));
            }
            Ok(())
        }
        other => Err(invalid(&format!(
            "{other} is neither a string nor an object"
        ))),
    }
}
