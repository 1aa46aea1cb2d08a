//! The verbs of `PUT /v1/nodes/{id}/states/provision {"target": <verb>}`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::states::Event;

/// A provision verb a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Active,
    Deploy,
    Rebuild,
    Deleted,
    Undeploy,
    Manage,
    Provide,
    Inspect,
    Abort,
    Clean,
    Adopt,
    Rescue,
    Unrescue,
    Unhold,
    Service,
}

impl Verb {
    pub const ALL: [Verb; 15] = [
        Verb::Active,
        Verb::Deploy,
        Verb::Rebuild,
        Verb::Deleted,
        Verb::Undeploy,
        Verb::Manage,
        Verb::Provide,
        Verb::Inspect,
        Verb::Abort,
        Verb::Clean,
        Verb::Adopt,
        Verb::Rescue,
        Verb::Unrescue,
        Verb::Unhold,
        Verb::Service,
    ];

    pub fn api_name(self) -> &'static str {
        match self {
            Verb::Active => "active",
            Verb::Deploy => "deploy",
            Verb::Rebuild => "rebuild",
            Verb::Deleted => "deleted",
            Verb::Undeploy => "undeploy",
            Verb::Manage => "manage",
            Verb::Provide => "provide",
            Verb::Inspect => "inspect",
            Verb::Abort => "abort",
            Verb::Clean => "clean",
            Verb::Adopt => "adopt",
            Verb::Rescue => "rescue",
            Verb::Unrescue => "unrescue",
            Verb::Unhold => "unhold",
            Verb::Service => "service",
        }
    }

    pub fn parse(name: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.api_name() == name)
    }

    /// The state machine's event the verb asks for: `active` and `deploy` both deploy,
    /// `deleted` and `undeploy` both tear down.
    pub fn event(self) -> Event {
        match self {
            Verb::Active | Verb::Deploy => Event::Deploy,
            Verb::Rebuild => Event::Rebuild,
            Verb::Deleted | Verb::Undeploy => Event::Delete,
            Verb::Manage => Event::Manage,
            Verb::Provide => Event::Provide,
            Verb::Inspect => Event::Inspect,
            Verb::Abort => Event::Abort,
            Verb::Clean => Event::Clean,
            Verb::Adopt => Event::Adopt,
            Verb::Rescue => Event::Rescue,
            Verb::Unrescue => Event::Unrescue,
            Verb::Unhold => Event::Unhold,
            Verb::Service => Event::Service,
        }
    }

    /// The API minor version that introduced the verb.
    pub fn since(self) -> u32 {
        match self {
            Verb::Active | Verb::Rebuild | Verb::Deleted => 1,
            Verb::Manage | Verb::Provide => 4,
            Verb::Inspect => 6,
            Verb::Abort => 13,
            Verb::Clean => 15,
            Verb::Adopt => 17,
            Verb::Rescue | Verb::Unrescue => 38,
            Verb::Unhold => 85,
            Verb::Service => 87,
            Verb::Deploy | Verb::Undeploy => 73,
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.api_name())
    }
}

// A verb crosses RPC by its name, as the string it was before it had a type.
impl Serialize for Verb {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(self.api_name())
    }
}

impl<'de> Deserialize<'de> for Verb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Verb::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown verb {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_round_trip_and_name_their_events() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.api_name()), Some(verb));
            if verb.api_name() != "active"
                && verb.api_name() != "deleted"
                && verb.api_name() != "undeploy"
            {
                assert_eq!(verb.event().name(), verb.api_name());
            }
        }
        assert_eq!(Verb::parse("delete"), None);
        assert_eq!(Verb::parse("Active"), None);
    }
}
