//! The multi-host stack's databases, made from a template instead of by migrating each one: on
//! MariaDB the migrations (their `ALTER TABLE`s included) take seconds per database, while
//! creating the finished tables takes a fraction of that, and every multi-host test makes one.
//!
//! Once per test process a database is migrated with `Db::migrate`, as `ferrum db-sync` does;
//! its tables' `SHOW CREATE TABLE` (indexes and foreign keys included, which `CREATE TABLE ...
//! LIKE` would drop) and the versions it recorded are kept, and it is dropped. Each database
//! made here then gets those tables and versions: the schema `db-sync` would leave. The
//! migrations themselves are still tested where they are the point (`db.rs`, `setup.rs`).

use diesel::{QueryableByName, sql_types::Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use tokio::sync::OnceCell;

use super::services::{Stack, TestDb, mysql_url};

/// The statements that give an empty database the migrated schema.
struct Template {
    statements: Vec<String>,
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct CreateTable {
    #[diesel(sql_type = Text)]
    #[diesel(column_name = "Create Table")]
    statement: String,
}

/// Diesel's record of the migrations run: the one table a migrated database has rows in.
const MIGRATIONS_TABLE: &str = "__diesel_schema_migrations";

/// What [`TestDb::new`] makes, a migrated database for `stack`, the MySQL one made from the
/// template.
pub async fn migrated(stack: Stack) -> Option<TestDb> {
    match stack {
        Stack::Embedded => TestDb::new(stack).await,
        Stack::MultiHost => migrated_mysql().await,
    }
}

/// A fresh database on the shared MySQL server with the schema of every migration; None
/// (announced) when the server is unreachable.
pub async fn migrated_mysql() -> Option<TestDb> {
    let server = mysql_url()?;
    let template = TEMPLATE.get_or_init(|| read_template(&server)).await;
    let db = TestDb::unmigrated_mysql().await?;
    let mut conn = connect(&db.url).await;
    // The tables come in name order, a table before those its foreign keys name or not.
    diesel::sql_query("SET FOREIGN_KEY_CHECKS = 0")
        .execute(&mut conn)
        .await
        .expect("foreign key checks off");
    for statement in &template.statements {
        diesel::sql_query(statement.as_str())
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    Some(db)
}

static TEMPLATE: OnceCell<Template> = OnceCell::const_new();

async fn connect(url: &str) -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// Migrates a database of its own on `server`, reads what a copy needs, and drops it.
async fn read_template(server: &str) -> Template {
    let migrated = TestDb::on_server(server).await;
    let mut conn = connect(&migrated.url).await;
    let tables: Vec<Name> = diesel::sql_query(
        "SELECT table_name AS name FROM information_schema.tables \
         WHERE table_schema = DATABASE() ORDER BY table_name",
    )
    .load(&mut conn)
    .await
    .expect("list the migrated tables");
    let mut statements = Vec::new();
    for Name { name } in tables {
        let created: Vec<CreateTable> = diesel::sql_query(format!("SHOW CREATE TABLE `{name}`"))
            .load(&mut conn)
            .await
            .expect("SHOW CREATE TABLE");
        let [CreateTable { statement }] = <[CreateTable; 1]>::try_from(created)
            .unwrap_or_else(|_| panic!("one definition of {name}"));
        statements.push(statement);
        if name != MIGRATIONS_TABLE {
            let rows: Vec<Name> =
                diesel::sql_query(format!("SELECT 'row' AS name FROM `{name}` LIMIT 1"))
                    .load(&mut conn)
                    .await
                    .expect("read the migrated table");
            assert!(
                rows.is_empty(),
                "the migrations left rows in {name}: copy them into each database too"
            );
        }
    }
    let versions: Vec<Name> =
        diesel::sql_query(format!("SELECT version AS name FROM {MIGRATIONS_TABLE}"))
            .load(&mut conn)
            .await
            .expect("read the migrations run");
    let values: Vec<String> = versions.iter().map(|v| format!("('{}')", v.name)).collect();
    statements.push(format!(
        "INSERT INTO {MIGRATIONS_TABLE} (version) VALUES {}",
        values.join(", ")
    ));
    Template { statements }
}
