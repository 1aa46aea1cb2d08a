//! The checks a node's values pass wherever they come from (create, PATCH, the traits API,
//! the configuration file), with Ironic's messages.

use crate::error::{Error, Result};

/// Node names: RFC 3986 unreserved characters, at most 255, not UUID-shaped, not a reserved word.
pub fn validate_name(name: &str) -> Result<()> {
    const RESERVED: &[&str] = &[
        "detail",
        "validate",
        "states",
        "maintenance",
        "management",
        "vendor_passthru",
    ];
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
    if name.is_empty()
        || name.len() > 255
        || !ok_chars
        || uuid::Uuid::try_parse(name).is_ok()
        || RESERVED.contains(&name)
    {
        return Err(Error::InvalidParameterValue(format!(
            "Expected a logical name but received {name}."
        )));
    }
    Ok(())
}

/// A UUID in its one stored spelling (lower case, hyphenated), so that uniqueness and filters
/// see one value; `field` names it in the error.
pub fn normalize_uuid(field: &str, value: &str) -> Result<String> {
    uuid::Uuid::try_parse(value)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| {
            Error::InvalidParameterValue(format!(
                "Expected a UUID for {field} but received {value}."
            ))
        })
}

/// A conductor group as stored: lower-cased, of `[a-zA-Z0-9_.-]`, at most 255 characters.
pub fn normalize_conductor_group(group: &str) -> Result<String> {
    let ok = group.len() <= 255
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(Error::InvalidConductorGroup(group.to_owned()));
    }
    Ok(group.to_ascii_lowercase())
}

pub fn validate_resource_class(resource_class: &str) -> Result<()> {
    validate_length("resource_class", resource_class, 80)
}

/// A free-text field is at most `max` characters (its column's size).
pub fn validate_length(field: &str, value: &str, max: usize) -> Result<()> {
    if value.chars().count() > max {
        return Err(Error::InvalidParameterValue(format!(
            "{field} must be at most {max} characters"
        )));
    }
    Ok(())
}

/// A trait is a custom one (`CUSTOM_[A-Z0-9_]+`) or named like os-traits' standard ones
/// (upper-case letters, digits and `_`), at most 255 characters. Ferrum does not carry the
/// os-traits catalogue, so a well-formed standard-looking name is accepted. `what` names where
/// it came from in the error.
pub fn validate_trait(what: &str, name: &str) -> Result<()> {
    let well_formed = !name.is_empty()
        && name.len() <= 255
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name != "CUSTOM_";
    if well_formed {
        Ok(())
    } else {
        Err(Error::InvalidParameterValue(format!(
            "Schema error for {what}: '{name}' is not valid under any of the given schemas. A trait is at most 255 characters: a standard os-traits name, or CUSTOM_ followed by A-Z, 0-9 and _."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("node-1.a_b~").is_ok());
        for bad in [
            "",
            "has space",
            "detail",
            "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uuids_are_stored_in_one_spelling() {
        assert_eq!(
            normalize_uuid("uuid", "1BE26C0B03F24D2EAE87C02D7F33C123").unwrap(),
            "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
        );
        assert!(normalize_uuid("uuid", "nope").is_err());
    }
}
