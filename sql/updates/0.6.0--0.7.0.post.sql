-- After the functions of 0.7.0 are defined (scripts/sql-gen.sh): what
-- of the update from 0.6.0 needs them.

-- the rules of 0.6.0 are their version 1, made by their policy's owner,
-- defined as every later version is (tms._rule_definition)
INSERT INTO tms.rule_versions (rule_id, version, policy_id, policy_name, changed_at,
                               changed_by, definition)
SELECT r.id, 1, p.id, p.name, r.created_at, p.owner::text, tms._rule_definition(r)
  FROM tms.maintenance_rules r JOIN tms.maintenance_policies p ON p.id = r.policy_id;
