//! /v1/deploy_templates (API 1.55): the API reads and writes deploy templates itself, as
//! Ironic's does (no node lock is involved), through the handlers of `collection.rs` (`named.rs`). A template is
//! named by UUID or by name.

use super::named::Named;
use crate::{
    deploy_template::{self, DeployTemplate},
    error::Result,
    node::JsonObject,
};

impl Named for DeployTemplate {
    const SINCE: u32 = deploy_template::SINCE;
    const PLURAL: &'static str = "deploy templates";
    const SUMMARY: &'static [&'static str] = deploy_template::SUMMARY;

    fn from_create(body: JsonObject, _minor: u32) -> Result<Self> {
        deploy_template::from_create(body)
    }
}

super::named::named_collection!(DeployTemplate);
