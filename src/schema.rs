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
        inspection_started_at -> Nullable<Timestamp>,
        inspection_finished_at -> Nullable<Timestamp>,
        last_request_id -> Nullable<Text>,
        owner -> Nullable<Text>,
        description -> Nullable<Text>,
        chassis_uuid -> Nullable<Text>,
        raid_config -> Text,
        target_raid_config -> Text,
        retired -> Bool,
        retired_reason -> Nullable<Text>,
        lessee -> Nullable<Text>,
        network_data -> Text,
        allocation_uuid -> Nullable<Text>,
        boot_mode -> Nullable<Text>,
        secure_boot -> Nullable<Bool>,
        shard -> Nullable<Text>,
        parent_node -> Nullable<Text>,
        disable_power_off -> Bool,
        service_step -> Text,
        firmware_interface -> Text,
        instance_name -> Nullable<Text>,
        health -> Nullable<Text>,
        clean_step -> Text,
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
        instance -> Nullable<Text>,
        hardware_interfaces -> Nullable<Text>,
    }
}

diesel::table! {
    chassis (id) {
        id -> Integer,
        uuid -> Text,
        description -> Nullable<Text>,
        extra -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    portgroups (id) {
        id -> Integer,
        uuid -> Text,
        name -> Nullable<Text>,
        node_uuid -> Text,
        address -> Nullable<Text>,
        extra -> Text,
        internal_info -> Text,
        standalone_ports_supported -> Bool,
        mode -> Nullable<Text>,
        properties -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        physical_network -> Nullable<Text>,
        category -> Nullable<Text>,
        dynamic_portgroup -> Bool,
    }
}

diesel::table! {
    ports (id) {
        id -> Integer,
        uuid -> Text,
        address -> Text,
        node_uuid -> Text,
        portgroup_uuid -> Nullable<Text>,
        extra -> Text,
        internal_info -> Text,
        local_link_connection -> Text,
        pxe_enabled -> Bool,
        physical_network -> Nullable<Text>,
        is_smartnic -> Bool,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        name -> Nullable<Text>,
        description -> Nullable<Text>,
        vendor -> Nullable<Text>,
        category -> Nullable<Text>,
        available_for_dynamic_portgroup -> Bool,
    }
}

diesel::table! {
    volume_connectors (id) {
        id -> Integer,
        uuid -> Text,
        node_uuid -> Text,
        connector_type -> Text,
        connector_id -> Text,
        extra -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    volume_targets (id) {
        id -> Integer,
        uuid -> Text,
        node_uuid -> Text,
        volume_type -> Text,
        properties -> Text,
        boot_index -> Integer,
        volume_id -> Text,
        extra -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    allocations (id) {
        id -> Integer,
        uuid -> Text,
        name -> Nullable<Text>,
        node_uuid -> Nullable<Text>,
        state -> Text,
        last_error -> Nullable<Text>,
        resource_class -> Nullable<Text>,
        traits -> Text,
        candidate_nodes -> Text,
        extra -> Text,
        owner -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        conductor_affinity -> Nullable<Text>,
    }
}

diesel::table! {
    deploy_templates (id) {
        id -> Integer,
        uuid -> Text,
        name -> Text,
        steps -> Text,
        extra -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    runbooks (id) {
        id -> Integer,
        uuid -> Text,
        name -> Text,
        steps -> Text,
        disable_ramdisk -> Bool,
        public -> Bool,
        owner -> Nullable<Text>,
        extra -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        description -> Nullable<Text>,
        traits -> Text,
    }
}

diesel::table! {
    inspection_rules (id) {
        id -> Integer,
        uuid -> Text,
        description -> Nullable<Text>,
        phase -> Text,
        priority -> Integer,
        sensitive -> Bool,
        conditions -> Text,
        actions -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    node_history (id) {
        id -> Integer,
        uuid -> Text,
        node_id -> Integer,
        conductor -> Nullable<Text>,
        event -> Text,
        event_type -> Text,
        severity -> Text,
        user -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        project -> Nullable<Text>,
        state -> Nullable<Text>,
        target_provision_state -> Nullable<Text>,
        duration_seconds -> Nullable<Integer>,
    }
}

diesel::table! {
    node_inventory (id) {
        id -> Integer,
        node_id -> Integer,
        inventory_data -> Text,
        plugin_data -> Text,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    bios_settings (node_id, name) {
        node_id -> Integer,
        name -> Text,
        value -> Nullable<Text>,
        attribute_type -> Nullable<Text>,
        allowable_values -> Nullable<Text>,
        lower_bound -> Nullable<BigInt>,
        max_length -> Nullable<Integer>,
        min_length -> Nullable<Integer>,
        read_only -> Nullable<Bool>,
        reset_required -> Nullable<Bool>,
        unique -> Nullable<Bool>,
        upper_bound -> Nullable<BigInt>,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    firmware_components (id) {
        id -> Integer,
        node_id -> Integer,
        component -> Text,
        initial_version -> Text,
        current_version -> Nullable<Text>,
        last_version_flashed -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Nullable<Timestamp>,
        vendor -> Nullable<Text>,
        model -> Nullable<Text>,
        serial_number -> Nullable<Text>,
    }
}
