//! JSON documents stored in a text column (`driver_info`, `properties`, `traits`, ...): parsed
//! once when the row is read, so a corrupt row fails at the edge instead of deep inside a flow.

use std::ops::{Deref, DerefMut};

use diesel::{deserialize::FromSqlRow, expression::AsExpression, sql_types::Text};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object, as Ironic's dict fields hold.
pub type JsonObject = Map<String, Value>;

/// A value stored as JSON text. Serialized as the value itself, so the wire form is unchanged; an
/// empty column reads as the default (an empty object or list).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, AsExpression, FromSqlRow,
)]
#[serde(transparent)]
#[diesel(sql_type = Text)]
pub struct Json<T>(pub T);

impl<T> Deref for Json<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Json<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> From<T> for Json<T> {
    fn from(value: T) -> Self {
        Json(value)
    }
}

/// Python's truth of a JSON value (`if value:`): null, false, zero and empty strings, lists and
/// objects are false. Ironic's code tests JSON this way (openstacksdk's config drive, the fake
/// vendor's `bar`, inspection rules' `loop` and `unique`).
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}
