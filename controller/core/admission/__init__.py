"""Admission checks: what the webhook refuses before an object is stored.

Every check is a pure function of the object (and, for an update, the stored one) that
returns Refusals naming the field and the rule, never a value. The webhook
(controller/io/admission.py) runs them before an object is stored; DecideOp runs those
that need no stored object again at reconcile (`spec_refusals`), so an object that got
past a missing webhook waits with InvalidSpec and runs no Job."""
