//! /v1/nodes/{id}/management/indicators (announced with API 1.63, but served at every version
//! as Ironic's `IndicatorController`, which checks none): the node's indicators (LEDs) by
//! component, and one indicator's state, read and set by the node's conductor through the
//! management interface. An indicator is named `<indicator>@<component>` in the path.

use axum::{Json, extract::State, http::StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::call_on;
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
    },
    error::{Error, Result},
    node::management::IndicatorState,
    resource::links,
    rpc::{RpcReply, RpcRequest},
};

/// `led@system` as (`led`, `system`): the component is what follows the first `@`, as Ironic
/// reads it.
fn split_indicator(unique: &str) -> Result<(String, String)> {
    match unique.split_once('@') {
        Some((name, component)) if !name.is_empty() && !component.is_empty() => {
            Ok((name.to_owned(), component.to_owned()))
        }
        // Ironic takes `@system` as an indicator named "" and lets the driver refuse it; the
        // message is the same, one step earlier.
        _ => Err(Error::InvalidParameterValue(format!(
            "Malformed indicator name \"{unique}\""
        ))),
    }
}

/// GET .../management/indicators: `{"indicators": [{name, component, readonly, states,
/// links}]}`, one entry per indicator of each component.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let indicators = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetSupportedIndicators { node }
    })
    .await?
    .pick(|r| match r {
        RpcReply::Indicators(indicators) => Ok(indicators),
        other => Err(other),
    })?;
    let mut out = Vec::new();
    for (component, named) in indicators {
        for (name, info) in named {
            let unique = format!("{name}@{component}");
            let states: Vec<&str> = info.states.iter().map(|s| s.api_name()).collect();
            out.push(json!({
                "name": unique,
                "component": component,
                "readonly": info.readonly,
                "states": states,
                "links": links(
                    &base,
                    "nodes",
                    &format!("{ident}/management/indicators/{unique}"),
                ),
            }));
        }
    }
    Ok(Json(json!({ "indicators": out })))
}

/// GET .../management/indicators/{indicator}@{component}: `{"state": ...}`.
pub async fn get_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath((ident, unique)): ApiPath<(String, String)>,
) -> Result<Json<Value>> {
    let (indicator, component) = split_indicator(&unique)?;
    let got = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetIndicatorState {
            node,
            component,
            indicator,
        }
    })
    .await?
    .pick(|r| match r {
        RpcReply::IndicatorState(s) => Ok(s),
        other => Err(other),
    })?;
    Ok(Json(json!({ "state": got.api_name() })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateBody {
    state: String,
}

/// PUT .../management/indicators/{indicator}@{component} `{"state"}`: 204 once it is set.
pub async fn set_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath((ident, unique)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<StateBody>,
) -> Result<StatusCode> {
    let (indicator, component) = split_indicator(&unique)?;
    let new_state = IndicatorState::parse(&body.state)?;
    call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::SetIndicatorState {
            node,
            component,
            indicator,
            state: new_state,
        }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indicator_names_split_at_the_first_at() {
        assert_eq!(
            split_indicator("led@system").unwrap(),
            ("led".to_owned(), "system".to_owned())
        );
        assert_eq!(
            split_indicator("a@b@c").unwrap(),
            ("a".to_owned(), "b@c".to_owned())
        );
        for bad in ["led", "@system", "led@", ""] {
            assert!(matches!(
                split_indicator(bad),
                Err(Error::InvalidParameterValue(_))
            ));
        }
    }
}
