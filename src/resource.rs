//! What the API's resources (nodes, ports, portgroups, chassis) have in common: each is described
//! to the API by one table of fields, naming the API version a field appeared in, how a response
//! shows it and how a client writes it (at create, by PATCH, what `remove` resets it to). The
//! version gates of create, PATCH and `?fields=`, rendering, and the typed reading of written
//! values (`patch.rs`) all read a resource's table, so a field is declared once per resource.
//!
//! Must not: know HTTP, the database or the conductor. Versions are API minor numbers (1.x).

pub mod json;
pub mod validate;

use chrono::NaiveDateTime;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// A resource the API shows and clients write through a field table.
pub trait Resource: Sized + 'static {
    /// A partial update of the resource (`None` leaves a field alone).
    type Changes: Default;
    /// The collection's name in URLs (`nodes`, `ports`) and in a listing's body.
    const COLLECTION: &'static str;
    /// The key of a listing's body (`nodes`; `connectors` for `volume/connectors`).
    const LIST_KEY: &'static str = Self::COLLECTION;
    /// The resource's fields in the API.
    fn fields() -> &'static [Field<Self>];
    /// The resource's UUID, for its links.
    fn uuid(&self) -> &str;
    /// Writes `changes` into the resource.
    fn apply(&mut self, changes: Self::Changes);
    /// Rules across fields, checked once a patch's or a create's values have been read.
    fn check_changes(&self, _changes: &mut Self::Changes) -> Result<()> {
        Ok(())
    }
}

/// The time as the database keeps it: UTC, to the microsecond (what both backends store).
pub fn now() -> NaiveDateTime {
    use chrono::Timelike;
    let now = chrono::Utc::now().naive_utc();
    now.with_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now)
}

/// What a response is rendered from.
#[derive(Debug)]
pub struct View<'a, R> {
    pub item: &'a R,
    /// The negotiated API minor version.
    pub minor: u32,
    /// The API's public URL, for links.
    pub base: &'a str,
    /// A node's conductor on the hash ring (shown from 1.49); None for other resources.
    pub conductor: Option<&'a str>,
}

impl<R> Clone for View<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for View<'_, R> {}

impl<'a, R> View<'a, R> {
    pub fn new(item: &'a R, minor: u32, base: &'a str) -> Self {
        View {
            item,
            minor,
            base,
            conductor: None,
        }
    }
}

/// One field of a resource in the API.
pub struct Field<R: Resource> {
    pub name: &'static str,
    /// The API minor version that introduced it.
    pub since: u32,
    /// Its value in a response.
    pub show: fn(&View<'_, R>) -> Value,
    /// How a client writes it; None for a read-only field.
    pub write: Option<Write<R>>,
}

/// How a client writes a field.
pub struct Write<R: Resource> {
    /// Whether a create (POST) may set it.
    pub create: bool,
    /// Whether PATCH may change it.
    pub patch: bool,
    /// What a PATCH `remove` of the whole field sets it to.
    pub reset: Reset,
    /// The stored value as JSON, unmasked (what a patch is applied to).
    pub get: fn(field: &str, item: &R) -> Value,
    /// Type-checks and validates a written value and records it in the changes when it differs
    /// from the resource's.
    pub set: fn(field: &str, item: &R, value: Value, changes: &mut R::Changes) -> Result<()>,
}

/// What a PATCH `remove` of a whole field does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// Refused: the field is mandatory.
    Mandatory,
    /// Back to the driver's default (a node's interface): null here, resolved by the conductor.
    DriverDefault,
    Null,
    False,
    True,
    EmptyString,
    EmptyObject,
}

impl Reset {
    /// The value a removed field gets, or None when it may not be removed.
    pub fn value(self) -> Option<Value> {
        match self {
            Reset::Mandatory => None,
            Reset::Null | Reset::DriverDefault => Some(Value::Null),
            Reset::False => Some(Value::Bool(false)),
            Reset::True => Some(Value::Bool(true)),
            Reset::EmptyString => Some(Value::String(String::new())),
            Reset::EmptyObject => Some(Value::Object(Map::new())),
        }
    }
}

/// The field named `name`, if the resource has one by that name in any version.
pub fn field<R: Resource>(name: &str) -> Option<&'static Field<R>> {
    R::fields().iter().find(|f| f.name == name)
}

/// How the field `name` is written, if a client may write it at all.
pub fn writable<R: Resource>(name: &str) -> Option<&'static Write<R>> {
    field::<R>(name).and_then(|f| f.write.as_ref())
}

/// The names of the fields PATCH may change, sorted.
pub fn patchable_names<R: Resource>() -> Vec<&'static str> {
    let mut names: Vec<_> = R::fields()
        .iter()
        .filter(|f| f.write.as_ref().is_some_and(|w| w.patch))
        .map(|f| f.name)
        .collect();
    names.sort_unstable();
    names
}

/// The full resource as `view` shows it: every field of its version.
pub fn render<R: Resource>(view: &View<'_, R>) -> Map<String, Value> {
    R::fields()
        .iter()
        .filter(|f| f.since <= view.minor)
        .map(|f| (f.name.to_owned(), (f.show)(view)))
        .collect()
}

/// The fields `names` of the version (others are skipped), as a listing's short form shows them.
pub fn render_some<R: Resource>(view: &View<'_, R>, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|name| field::<R>(name))
        .filter(|f| f.since <= view.minor)
        .map(|f| (f.name.to_owned(), (f.show)(view)))
        .collect()
}

/// Only the fields `names` (checked by [`check_field_names`]) and the links, for `?fields=`.
pub fn render_fields<R: Resource>(view: &View<'_, R>, names: &[String]) -> Map<String, Value> {
    let mut m: Map<String, Value> = names
        .iter()
        .filter_map(|name| field::<R>(name))
        .map(|f| (f.name.to_owned(), (f.show)(view)))
        .collect();
    m.insert(
        "links".into(),
        links(view.base, R::COLLECTION, view.item.uuid()),
    );
    m
}

/// The names a `?fields=` value lists.
pub fn field_names(fields: &str) -> Vec<String> {
    fields
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Checks the names of `?fields=` at API minor version `minor`: a field the version does not
/// have is 406 when a later version has it; an unknown one is 400.
pub fn check_field_names<R: Resource>(minor: u32, names: &[String]) -> Result<()> {
    for name in names {
        match field::<R>(name) {
            Some(f) if f.since <= minor => {}
            Some(_) => {
                return Err(Error::NotAcceptable(format!(
                    "Field {name} is not available in API version 1.{minor}."
                )));
            }
            None => {
                return Err(Error::InvalidParameterValue(format!(
                    "Field {name} is not a valid field."
                )));
            }
        }
    }
    Ok(())
}

pub fn timestamp(t: &NaiveDateTime) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
}

pub fn opt_timestamp(t: &Option<NaiveDateTime>) -> Value {
    t.as_ref()
        .map(|t| Value::String(timestamp(t)))
        .unwrap_or(Value::Null)
}

/// A resource's `links`: itself and its bookmark.
pub fn links(base: &str, collection: &str, id: &str) -> Value {
    json!([
        {"href": format!("{base}/v1/{collection}/{id}"), "rel": "self"},
        {"href": format!("{base}/{collection}/{id}"), "rel": "bookmark"},
    ])
}

/// The links of a resource's sub-collection (`/v1/nodes/<uuid>/ports`).
pub fn sub_links<R: Resource>(view: &View<'_, R>, what: &str) -> Value {
    links(
        view.base,
        R::COLLECTION,
        &format!("{}/{what}", view.item.uuid()),
    )
}

// Readers of written values, shared by the tables. `field` names the field in errors.

pub fn wrong(field: &str, want: &str, got: &Value) -> Error {
    Error::InvalidParameterValue(format!(
        "Invalid value for {field}: invalid type {got}, expected {want}"
    ))
}

pub fn string(field: &str, v: Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(wrong(field, "a string", &other)),
    }
}

pub fn opt_string(field: &str, v: Value) -> Result<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(wrong(field, "a string or null", &other)),
    }
}

pub fn object(field: &str, v: Value) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(wrong(field, "an object", &other)),
    }
}

/// A JSON object where null (as Ironic's schemas allow for `extra` and the like) is empty.
pub fn object_or_null(field: &str, v: Value) -> Result<Map<String, Value>> {
    match v {
        Value::Null => Ok(Map::new()),
        other => object(field, other),
    }
}

/// A boolean as Ironic takes it: JSON true/false, or a string oslo's strict `bool_from_string`
/// reads (the `baremetal` CLI sends `"True"`); null is None.
pub fn boolean(field: &str, v: Value) -> Result<Option<bool>> {
    let parsed = match &v {
        Value::Null => return Ok(None),
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
            "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    };
    parsed.map(Some).ok_or_else(|| {
        Error::InvalidParameterValue(format!(
            "Invalid value for {field}: expected a boolean, got {v}"
        ))
    })
}

/// A JSON boolean and nothing else (neither null nor a string), as Ironic's schema types the
/// fields of its newer versions (`{'type': 'boolean'}`).
pub fn strict_boolean(field: &str, v: Value) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(wrong(field, "a boolean", &other)),
    }
}

/// Records `new` in `slot` when it differs from `old`.
pub fn set_if<T: PartialEq>(slot: &mut Option<T>, new: T, old: &T) {
    if new != *old {
        *slot = Some(new);
    }
}

/// Declares a stored resource `$name` (its row, as diesel reads and inserts it, and as RPC carries
/// it) and `$changes`, a partial update of it, from one list of fields, as `node_type!` does for
/// the node. Besides the listed fields, the row has its `id`, assigned by the database.
macro_rules! record_type {
    (
        $(#[$meta:meta])* $name:ident, $changes:ident, $table:ident {
            $( $(#[$attr:meta])* $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
            diesel::Queryable, diesel::Selectable, diesel::Insertable,
        )]
        #[diesel(table_name = crate::schema::$table)]
        pub struct $name {
            /// The row's key, assigned by the database when the row is inserted.
            #[diesel(skip_insertion)]
            pub id: i32,
            $( $(#[$attr])* pub $field: $ty, )*
        }

        /// A partial update: `None` leaves a field alone, `Some(v)` writes `v`.
        #[derive(Debug, Clone, Default, PartialEq, diesel::AsChangeset)]
        #[diesel(table_name = crate::schema::$table)]
        pub struct $changes {
            $( pub $field: Option<$ty>, )*
        }

        impl $changes {
            /// Sets the fields these changes name on `item`.
            pub fn set_into(self, item: &mut $name) {
                $( if let Some(value) = self.$field { item.$field = value; } )*
            }

            /// Whether these changes write nothing.
            pub fn is_empty(&self) -> bool {
                true $( && self.$field.is_none() )*
            }
        }
    };
}
pub(crate) use record_type;

/// Implements [`Resource`] for `$name`, a [`record_type!`] (partial update `$changes`) named by
/// its `uuid`, with the field table `$fields`, listed under `$collection` (the listing's body
/// under `$list_key`, when given). A resource with rules across its fields writes its own.
macro_rules! record_resource {
    ($name:ident, $changes:ident, $collection:literal, $fields:ident $(, list_key $list_key:literal)?) => {
        impl $crate::resource::Resource for $name {
            type Changes = $changes;
            const COLLECTION: &'static str = $collection;
            $(const LIST_KEY: &'static str = $list_key;)?

            fn fields() -> &'static [$crate::resource::Field<$name>] {
                $fields
            }

            fn uuid(&self) -> &str {
                &self.uuid
            }

            fn apply(&mut self, changes: $changes) {
                changes.set_into(self);
            }
        }

        impl $name {
            /// A new record: a fresh UUID, created now, the rest defaults.
            pub fn new_record() -> $name {
                $name {
                    uuid: uuid::Uuid::new_v4().to_string(),
                    created_at: $crate::resource::now(),
                    ..$name::default()
                }
            }
        }
    };
}
pub(crate) use record_resource;

/// Field-table rows that every resource but the node has in the same shape: a `uuid` a create
/// may give, `extra`-like JSON documents (null reads as empty), timestamps and `links`.
macro_rules! uuid_field {
    ($since:expr) => {
        $crate::resource::Field {
            name: "uuid",
            since: $since,
            show: |v| serde_json::json!(v.item.uuid),
            write: Some($crate::resource::Write {
                create: true,
                patch: false,
                reset: $crate::resource::Reset::Mandatory,
                get: |_, r| serde_json::json!(r.uuid),
                set: |f, r, v, c| {
                    let uuid = $crate::resource::validate::normalize_uuid(
                        f,
                        &$crate::resource::string(f, v)?,
                    )?;
                    $crate::resource::set_if(&mut c.uuid, uuid, &r.uuid);
                    Ok(())
                },
            }),
        }
    };
}
pub(crate) use uuid_field;

/// `node_uuid`, from 1.`$since`: the node a child resource (port, portgroup, volume connector or
/// target) belongs to, by UUID; mandatory.
macro_rules! node_uuid_field {
    ($since:expr) => {
        $crate::resource::Field {
            name: "node_uuid",
            since: $since,
            show: |v| serde_json::json!(v.item.node_uuid),
            write: Some($crate::resource::Write {
                create: true,
                patch: true,
                reset: $crate::resource::Reset::Mandatory,
                get: |_, r| serde_json::json!(r.node_uuid),
                set: |f, r, v, c| {
                    let uuid = $crate::resource::validate::normalize_uuid(
                        f,
                        &$crate::resource::string(f, v)?,
                    )?;
                    $crate::resource::set_if(&mut c.node_uuid, uuid, &r.node_uuid);
                    Ok(())
                },
            }),
        }
    };
}
pub(crate) use node_uuid_field;

/// `name`, from 1.`$since`, of a resource named by a trait (a deploy template, a runbook: the
/// node or instance trait that selects it); mandatory.
macro_rules! trait_name_field {
    ($since:expr) => {
        $crate::resource::Field {
            name: "name",
            since: $since,
            show: |v| serde_json::json!(v.item.name),
            write: Some($crate::resource::Write {
                create: true,
                patch: true,
                reset: $crate::resource::Reset::Mandatory,
                get: |_, r| serde_json::json!(r.name),
                set: |f, r, v, c| {
                    let name = $crate::resource::string(f, v)?;
                    $crate::resource::validate::validate_trait(f, &name)?;
                    $crate::resource::set_if(&mut c.name, name, &r.name);
                    Ok(())
                },
            }),
        }
    };
}
pub(crate) use trait_name_field;

/// A writable JSON-object field `$field` (null reads as `{}`), from 1.`$since`.
macro_rules! document_field {
    ($name:literal, $field:ident, $since:expr) => {
        $crate::resource::Field {
            name: $name,
            since: $since,
            show: |v| serde_json::Value::Object(v.item.$field.0.clone()),
            write: Some($crate::resource::Write {
                create: true,
                patch: true,
                reset: $crate::resource::Reset::EmptyObject,
                get: |_, r| serde_json::Value::Object(r.$field.0.clone()),
                set: |f, r, v, c| {
                    let doc = $crate::resource::object_or_null(f, v)?;
                    $crate::resource::set_if(
                        &mut c.$field,
                        $crate::resource::json::Json(doc),
                        &r.$field,
                    );
                    Ok(())
                },
            }),
        }
    };
}
pub(crate) use document_field;

/// An optional free-text field `$field` (null clears it) of at most `$max` characters (its
/// column's size, as Ironic's schema has it), from 1.`$since`.
macro_rules! bounded_text_field {
    ($name:literal, $field:ident, $since:expr, $max:expr) => {
        $crate::resource::Field {
            name: $name,
            since: $since,
            show: |v| serde_json::json!(v.item.$field),
            write: Some($crate::resource::Write {
                create: true,
                patch: true,
                reset: $crate::resource::Reset::Null,
                get: |_, r| serde_json::json!(r.$field),
                set: |f, r, v, c| {
                    let text = $crate::resource::opt_string(f, v)?;
                    if let Some(text) = &text {
                        $crate::resource::validate::validate_length(f, text, $max)?;
                    }
                    $crate::resource::set_if(&mut c.$field, text, &r.$field);
                    Ok(())
                },
            }),
        }
    };
}
pub(crate) use bounded_text_field;

/// `created_at`, from 1.`$since`.
macro_rules! created_at_field {
    ($since:expr) => {
        $crate::resource::Field {
            name: "created_at",
            since: $since,
            show: |v| serde_json::json!($crate::resource::timestamp(&v.item.created_at)),
            write: None,
        }
    };
}
pub(crate) use created_at_field;

/// `updated_at`, from 1.`$since`.
macro_rules! updated_at_field {
    ($since:expr) => {
        $crate::resource::Field {
            name: "updated_at",
            since: $since,
            show: |v| $crate::resource::opt_timestamp(&v.item.updated_at),
            write: None,
        }
    };
}
pub(crate) use updated_at_field;

/// `links` of a resource of `$collection`, from 1.`$since`.
macro_rules! links_field {
    ($collection:literal, $since:expr) => {
        $crate::resource::Field {
            name: "links",
            since: $since,
            show: |v| $crate::resource::links(v.base, $collection, &v.item.uuid),
            write: None,
        }
    };
}
pub(crate) use links_field;
