-- What a conductor enables of each hardware type it offers (Ironic's rows of
-- `conductor_hardware_interfaces`), as JSON: by hardware type, its `default_<kind>_interface` and
-- `enabled_<kind>_interfaces`, which /v1/drivers shows. NULL in a row of a release before it.
ALTER TABLE conductors ADD COLUMN hardware_interfaces TEXT NULL;
