"""TRUNCATE refusals on the audit tables, and a checkpoint that only moves forward.

The append-only triggers of 0002 are row triggers, and TRUNCATE fires no row trigger: a statement-level
BEFORE TRUNCATE trigger refuses it on the audit chain and on the checkpoint table (feedback's migration
0010 adds the same refusal to the weight history). ``graphadmin_refuse_truncate`` is shared with it.

The checkpoint (the last event a full walk proved) may move forward only: a trigger refuses an UPDATE
that lowers its seq, or changes its hash at the same seq, or moves it to another organization, and
refuses DELETE. Verification then cannot be "healed" by re-verifying a shortened chain.
"""

from django.db import migrations

REFUSE_TRUNCATE_FUNCTION = """
CREATE OR REPLACE FUNCTION graphadmin_refuse_truncate() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'append-only table %: TRUNCATE is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

CHECKPOINT_FORWARD_FUNCTION = """
CREATE OR REPLACE FUNCTION graphadmin_checkpoint_forward_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'audit checkpoint of organization %: DELETE is not allowed', OLD.organization_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.organization_id <> OLD.organization_id OR NEW.seq < OLD.seq
       OR (NEW.seq = OLD.seq AND NEW.hash <> OLD.hash) THEN
        RAISE EXCEPTION 'audit checkpoint of organization %: it may only move forward (seq % -> %)',
            OLD.organization_id, OLD.seq, NEW.seq
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

TRIGGERS = """
CREATE TRIGGER graphadmin_auditevent_refuse_truncate
    BEFORE TRUNCATE ON graphadmin_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION graphadmin_refuse_truncate();
CREATE TRIGGER graphadmin_auditcheckpoint_refuse_truncate
    BEFORE TRUNCATE ON graphadmin_auditcheckpoint
    FOR EACH STATEMENT EXECUTE FUNCTION graphadmin_refuse_truncate();
CREATE TRIGGER graphadmin_auditcheckpoint_forward_only
    BEFORE UPDATE OR DELETE ON graphadmin_auditcheckpoint
    FOR EACH ROW EXECUTE FUNCTION graphadmin_checkpoint_forward_only();
"""

DROP_TRIGGERS = """
DROP TRIGGER graphadmin_auditevent_refuse_truncate ON graphadmin_auditevent;
DROP TRIGGER graphadmin_auditcheckpoint_refuse_truncate ON graphadmin_auditcheckpoint;
DROP TRIGGER graphadmin_auditcheckpoint_forward_only ON graphadmin_auditcheckpoint;
"""


class Migration(migrations.Migration):
    dependencies = [("graphadmin", "0008_times_from_clock")]

    operations = [
        migrations.RunSQL(REFUSE_TRUNCATE_FUNCTION, "DROP FUNCTION graphadmin_refuse_truncate() CASCADE;"),
        migrations.RunSQL(CHECKPOINT_FORWARD_FUNCTION, "DROP FUNCTION graphadmin_checkpoint_forward_only() CASCADE;"),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
