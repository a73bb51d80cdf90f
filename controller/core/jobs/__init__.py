"""An object's Jobs and their history: reading one Job, the classified record every count
is read from, the backoff it gives, retention, and the values a Job must never let out."""
