"""An object's spec as the core reads it: the checks that make its Jobs impossible
(policy), its change windows, its durable inputs, its Ready condition as others see it,
and the shard labels its Jobs and Secrets carry."""
