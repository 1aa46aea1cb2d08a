//! How the domain's typed values are stored: provision and power states as their API names,
//! JSON documents as JSON text, on both backends. A value that does not read back (a corrupt
//! row) is a deserialization error naming what it found.

use diesel::{
    backend::Backend,
    deserialize::{self, FromSql},
    mysql::Mysql,
    serialize::{self, IsNull, Output, ToSql},
    sql_types::Text,
    sqlite::Sqlite,
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    node::{Json, PowerState},
    states::ProvisionState,
};

impl<DB: Backend> FromSql<Text, DB> for ProvisionState
where
    String: FromSql<Text, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
        let name = String::from_sql(bytes)?;
        ProvisionState::from_api_name(&name)
            .ok_or_else(|| format!("corrupt provision state in the database: {name:?}").into())
    }
}

impl<DB: Backend> ToSql<Text, DB> for ProvisionState
where
    str: ToSql<Text, DB>,
{
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
        self.api_name().to_sql(out)
    }
}

impl<DB: Backend> FromSql<Text, DB> for PowerState
where
    String: FromSql<Text, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
        let name = String::from_sql(bytes)?;
        PowerState::from_api_name(&name)
            .ok_or_else(|| format!("corrupt power state in the database: {name:?}").into())
    }
}

impl<DB: Backend> ToSql<Text, DB> for PowerState
where
    str: ToSql<Text, DB>,
{
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
        self.api_name().to_sql(out)
    }
}

impl<DB: Backend, T: DeserializeOwned + Default> FromSql<Text, DB> for Json<T>
where
    String: FromSql<Text, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
        let text = String::from_sql(bytes)?;
        if text.is_empty() {
            return Ok(Json(T::default()));
        }
        serde_json::from_str(&text)
            .map(Json)
            .map_err(|e| format!("corrupt JSON in the database: {e}").into())
    }
}

impl<T: Serialize + std::fmt::Debug> ToSql<Text, Mysql> for Json<T> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Mysql>) -> serialize::Result {
        serde_json::to_writer(out, &self.0)?;
        Ok(IsNull::No)
    }
}

impl<T: Serialize + std::fmt::Debug> ToSql<Text, Sqlite> for Json<T> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}
