"""DecideOp: the one decision for an object, from a snapshot and the time. `steps` holds the
order of the rules; the other modules are the snapshot it reads, the context derived once,
the triggers, the gates, and what a decision is."""
