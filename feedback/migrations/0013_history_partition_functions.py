"""The weight history's monthly partitions are made and dropped by two functions of the table owner.

The application runs as a role that is not the owner (docs/security.md "Database roles") and may run no DDL, yet
its daily task keeps partitions three months ahead and expires whole months past the retention setting
(``feedback.retention``). Both go through these ``SECURITY DEFINER`` functions, which do only that: on the
two history tables, for a month given by its first day; the drop refuses a month that is not over yet
(so the application cannot expire the history it is writing). EXECUTE is taken from PUBLIC and given to
the application role by ``graphadmin.runtime.db_roles`` after each migrate.
"""

from django.db import migrations

FUNCTIONS = """
CREATE OR REPLACE FUNCTION feedback_history_partition_name(parent text, month date) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = public, pg_temp AS $$
BEGIN
    IF parent NOT IN ('feedback_weightchange', 'feedback_weightchangeblock') THEN
        RAISE EXCEPTION 'not a weight-history table: %', parent USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF month IS NULL OR month <> date_trunc('month', month)::date THEN
        RAISE EXCEPTION 'a weight-history partition starts on the first of a month, not %', month
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN parent || '_' || to_char(month, 'YYYY_MM');
END;
$$;

CREATE OR REPLACE FUNCTION feedback_history_create_partition(parent text, month date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    name text := feedback_history_partition_name(parent, month);
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                   name, parent, month, (month + interval '1 month')::date);
    -- Statement triggers are not cloned to partitions: the TRUNCATE refusal of migration 0011, by hand.
    EXECUTE format('CREATE TRIGGER feedback_history_refuse_truncate BEFORE TRUNCATE ON %I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION graphadmin_refuse_truncate()', name);
    RETURN true;
END;
$$;

CREATE OR REPLACE FUNCTION feedback_history_drop_partition(parent text, month date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    name text := feedback_history_partition_name(parent, month);
BEGIN
    IF (month + interval '1 month') > now() THEN
        RAISE EXCEPTION 'weight history of %: only months that are over may be expired', month
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF to_regclass(name) IS NULL THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(name) AND inhparent = to_regclass(parent)) THEN
        RAISE EXCEPTION '% is not a partition of %', name, parent USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, name);
    EXECUTE format('DROP TABLE %I', name);
    RETURN true;
END;
$$;

REVOKE ALL ON FUNCTION feedback_history_create_partition(text, date) FROM PUBLIC;
REVOKE ALL ON FUNCTION feedback_history_drop_partition(text, date) FROM PUBLIC;
"""

DROP = """
DROP FUNCTION feedback_history_drop_partition(text, date);
DROP FUNCTION feedback_history_create_partition(text, date);
DROP FUNCTION feedback_history_partition_name(text, date);
"""


class Migration(migrations.Migration):
    dependencies = [("feedback", "0012_session_owner")]

    operations = [migrations.RunSQL(FUNCTIONS, DROP)]
