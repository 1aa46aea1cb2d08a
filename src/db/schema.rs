// The diesel schema, matching migrations/mysql (and, later, migrations/sqlite) exactly.
// Keep it in the shape `diesel print-schema` emits.

diesel::table! {
    nodes (id) {
        id -> Integer,
        uuid -> Text,
        name -> Nullable<Text>,
        driver -> Text,
        deploy_interface -> Text,
        power_interface -> Text,
        management_interface -> Text,
        resource_class -> Nullable<Text>,
        conductor_group -> Text,
        driver_info -> Text,
        driver_internal_info -> Text,
        properties -> Text,
        instance_info -> Text,
        instance_uuid -> Nullable<Text>,
        extra -> Text,
        provision_state -> Text,
        target_provision_state -> Nullable<Text>,
        provision_updated_at -> Nullable<Timestamp>,
        power_state -> Nullable<Text>,
        target_power_state -> Nullable<Text>,
        maintenance -> Bool,
        maintenance_reason -> Nullable<Text>,
        last_error -> Nullable<Text>,
        reservation -> Nullable<Text>,
        conductor_affinity -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        version -> BigInt,
        boot_interface -> Text,
        console_interface -> Text,
        inspect_interface -> Text,
        network_interface -> Text,
        raid_interface -> Text,
        vendor_interface -> Text,
        console_enabled -> Bool,
        storage_interface -> Text,
        rescue_interface -> Text,
        bios_interface -> Text,
        traits -> Text,
        fault -> Nullable<Text>,
        deploy_step -> Text,
        automated_clean -> Nullable<Bool>,
        protected -> Bool,
        protected_reason -> Nullable<Text>,
    }
}

diesel::table! {
    conductors (id) {
        id -> Integer,
        hostname -> Text,
        drivers -> Text,
        conductor_group -> Text,
        online -> Bool,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}
