"""Commands for people: `captf get`, `approve`, `plan show`, `restore`.

Each command reads the cluster as any client would, and reads it with the same
functions the controller decides with, so what a person is told and what the
controller does cannot drift apart."""
